#!/usr/bin/env python
"""Thesis Tables 7.4 and 7.5 for our Transformer and LSTM: 4-bit weights, + 4-bit dot products.

The same as ``tf-nmt study lowprec`` with the same arguments, plus ``--tiny``, which trains on the
test helpers' toy corpus; the study is :mod:`tf_nmt.studies.lowprec` (its docstring has the
details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tf_nmt and tests

from tests.helpers import write_toy_data_dir  # noqa: E402
from tf_nmt.studies.lowprec import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], toy_data=write_toy_data_dir))
