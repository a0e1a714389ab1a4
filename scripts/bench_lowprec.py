#!/usr/bin/env python
"""Table 7.5 on this CPU: ns per 128-element dot product (fp32 FMA, int8 VNNI, 4-bit log shift16
and lut8) and GFLOP/s-equivalent on the models' matmul shapes; writes
``results/lowprec_kernels.json``. Thin entry point over :mod:`tf_nmt.studies.lowprec_bench`
(its docstring has the details).

Usage: python scripts/bench_lowprec.py [--rounds 101] [--matmul-rounds 9] [--bursts 9] [--out PATH] [--quick]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tf_nmt

from tf_nmt.studies.lowprec_bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
