"""Scripts that tests/parallel launches under horovodrun."""

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Dict


def run_rank(work: Callable[[Any, Path], Dict[str, Any]]) -> None:
    """A worker's main: parse ``--out``, initialise Horovod, run ``work(ctx, out)`` and write
    its result, with the rank and size, to ``<out>/rank<r>.json``."""
    from tf_nmt import distributed  # noqa: PLC0415 - workers put the repo on sys.path first

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    out = parser.parse_args().out
    ctx = distributed.init(enabled=True)
    result = {"rank": ctx.rank, "size": ctx.size, **work(ctx, out)}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{ctx.rank}.json").write_text(json.dumps(result))
