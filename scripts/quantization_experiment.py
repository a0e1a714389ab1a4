#!/usr/bin/env python
"""The model-compression experiment: log-quantised Transformer and GNMT on our corpus.

The same as ``tf-nmt study quantization`` with the same arguments, plus ``--tiny``, which trains
on the test helpers' toy corpus; the study is :mod:`tf_nmt.studies.quantization` (its docstring
has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tf_nmt and tests

from tests.helpers import write_toy_data_dir  # noqa: E402
from tf_nmt.studies.quantization import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], toy_data=write_toy_data_dir))
