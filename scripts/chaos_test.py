#!/usr/bin/env python
"""Chaos test: an elastic run with random worker kills, a resume check and a list of bad inputs;
writes results/reliability.json.

The same as ``tf-nmt study chaos`` with the same arguments; the study is
:mod:`tf_nmt.studies.chaos` (its docstring has the details).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.studies import run_study  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_study("chaos", sys.argv[1:]))
