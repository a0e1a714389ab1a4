#!/usr/bin/env bash
# One-time set-up of a fresh machine (Python 3.11, gcc, cmake; apt + PyPI reachable):
#   .venv with the pinned stack → Horovod 0.28.1 built from source (Gloo + MPI) → tf-nmt with
#   its C++ custom ops. Idempotent: re-running skips what is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON_BIN="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON_BIN" -m venv .venv
fi
VPY="$PWD/.venv/bin/python"
"$VPY" -m pip install -q --upgrade pip "setuptools<81" wheel
"$VPY" -m pip install -q -r requirements-test.txt
bash scripts/install_horovod.sh "$VPY"
# --no-build-isolation: the custom ops compile against the TensorFlow installed above.
"$VPY" -m pip install -q --no-build-isolation --no-deps -e .
"$VPY" -c "import tf_nmt.ops.loader as l; l.load_ops(); print('tf-nmt installed; custom ops loaded')"
