#!/usr/bin/env python
"""Accumulation-size study: bytes Horovod moves and accumulates per step, sparse_as_dense off/on.

The same as ``tf-nmt study accumulation`` with the same arguments; the study is
:mod:`tf_nmt.studies.accumulation` (its docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.studies import run_study  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_study("accumulation", sys.argv[1:]))
