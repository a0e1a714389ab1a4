#!/usr/bin/env python
"""Weak/strong scaling study on this machine, an emulated cluster or a real one.

The same as ``tf-nmt study scaling`` with the same arguments; the study is
:mod:`tf_nmt.studies.scaling` (its docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.studies import run_study  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_study("scaling", sys.argv[1:]))
