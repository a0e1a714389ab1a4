#!/usr/bin/env python
"""BLEU of a horovodrun -np N training run against one process at the same effective batch.

The same as ``tf-nmt study hvd-vs-single`` with the same arguments; the study is
:mod:`tf_nmt.studies.hvd_vs_single` (its docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.studies import run_study  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_study("hvd-vs-single", sys.argv[1:]))
