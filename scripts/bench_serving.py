#!/usr/bin/env python
"""Serving speed of the exported translator: sentences/s and target tokens/s by request size and
sentence length, plain against length-sorted chunks, greedy and in-process evaluate, alternating;
writes ``results/serving_speed.json``. Thin entry point over :mod:`tf_nmt.studies.serving_speed`.

Usage: python scripts/bench_serving.py --run-dir RUN [--per-band 64] [--batch-sizes 1,16,64]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tf_nmt

from tf_nmt.studies.serving_speed import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
