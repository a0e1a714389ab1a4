#!/usr/bin/env bash
# The peer for python -m experiments train-speed: OpenNMT-tf 2.32 (TensorFlow 2.13) in a side virtualenv,
# .venv-onmt/ (never the project's .venv: it pins another TensorFlow). ~3 minutes, ~2 GB.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root: .venv-onmt/ is where the study looks
PYTHON=${PYTHON:-python3.11}
VENV=${ONMT_VENV:-.venv-onmt}
if [ ! -x "$VENV/bin/onmt-main" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "OpenNMT-tf==2.32.0" "tensorflow==2.13.1" "tensorflow-addons==0.21.0"
fi
"$VENV/bin/python" -c "import opennmt, tensorflow as tf; print('OpenNMT-tf', opennmt.__version__, 'TF', tf.__version__)"
