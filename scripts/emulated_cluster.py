#!/usr/bin/env python
"""An emulated multi-host cluster on one machine (network namespaces + bridge + tc), as root:
``check``, ``bench``, ``run -- CMD``, ``cleanup``. The tool is :mod:`tf_nmt.scaling.cluster_cli`.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also from a plain checkout

from tf_nmt.scaling.cluster_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
