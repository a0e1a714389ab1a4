"""A progress line every few seconds during the long passes: pairs done, pairs/s, ETA."""
from __future__ import annotations

import time
from typing import Callable, Optional

Log = Callable[[str], None]
EVERY_S = 5.0


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Call :meth:`tick` often (it is cheap); a line is printed at most every ``every`` seconds.
    The ETA comes from ``fraction`` (0..1 of the work done) when given, else from ``total``."""

    def __init__(self, label: str, log: Log, total: Optional[int] = None,
                 every: float = EVERY_S) -> None:
        self.label, self.log, self.total, self.every = label, log, total, every
        self.start = self._last = time.monotonic()

    def tick(self, done: int, fraction: Optional[float] = None) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        if fraction is None and self.total:
            fraction = done / self.total
        eta = f", ETA {_clock(elapsed * (1 - fraction) / fraction)}" if fraction else ""
        self.log(f"  {self.label}: {done:,} pairs, {rate:,.0f} pairs/s{eta}")

    def elapsed(self) -> float:
        return time.monotonic() - self.start
