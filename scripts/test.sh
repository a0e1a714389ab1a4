#!/usr/bin/env bash
# The test suite as CI runs it (.ci/run): every test on Keras 3, tf-nmt's default, then the tests
# marked keras2 again with tf-nmt's models on Keras 2 (TF_NMT_KERAS=2; pytest.ini lists the
# markers). Extra arguments go to both runs, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
TF_NMT_KERAS=3 .venv/bin/python -m pytest -q -ra "$@" || status=$?
echo "== the keras2 tests again on Keras 2 (TF_NMT_KERAS=2)"
TF_NMT_KERAS=2 .venv/bin/python -m pytest -q -ra -m keras2 "$@" || status=$?
exit "$status"
