#!/usr/bin/env python
"""The training step alone on fixed-shape batches: fp32, bf16 and XLA side by side, alternating,
with an op-type profile from the TF profiler.

The same as ``tf-nmt study step-speed``; the study is :mod:`tf_nmt.studies.step_speed` (its
docstring has the details and example commands).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, when not installed

from tf_nmt.studies.step_speed import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
