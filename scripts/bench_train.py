#!/usr/bin/env python
"""Training speed: tf-nmt's variants (fp32, bf16, XLA, threads, allocator, 2x1 under horovodrun)
and OpenNMT-tf on the same model and batch, alternating in one invocation.

The same as ``tf-nmt study train-speed``; the study is :mod:`tf_nmt.studies.train_speed` (its
docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, when not installed

from tf_nmt.studies.train_speed import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
