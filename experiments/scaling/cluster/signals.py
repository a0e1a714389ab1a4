"""Turn SIGINT/SIGTERM/SIGHUP into KeyboardInterrupt, so ``finally`` blocks (namespace teardown,
stopping ranks) run however a script is stopped."""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


def _raise(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (SIGINT too, because
    a shell starts background jobs with SIGINT ignored)."""
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
