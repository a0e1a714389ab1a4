#!/usr/bin/env python
"""Graddrop's exchange in the drop warm-up: allgather against the dense fallback, under horovodrun.

The same as ``tf-nmt study graddrop-warmup`` with the same arguments; the study is
:mod:`tf_nmt.studies.graddrop_warmup` (its docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.studies import run_study  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_study("graddrop-warmup", sys.argv[1:]))
