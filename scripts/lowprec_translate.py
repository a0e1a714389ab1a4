#!/usr/bin/env python
"""Translation speed (sentences/s, beam 4) of a run with quantised matmul inputs, its matmuls in
fp32, int8 and the log-space kernels, alternating; writes ``results/lowprec_translate.json``.
Thin entry point over :mod:`tf_nmt.studies.lowprec_translate` (its docstring has the details).

Usage: python scripts/lowprec_translate.py --run-dir RUN [--limit N] [--rounds 3] [--out PATH]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tf_nmt

from tf_nmt.studies.lowprec_translate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
