# Sourced on the device-tool machine: the carried site first, then /tmp/repo; CPU only.
export PYTHONPATH=/tmp/site:/tmp/repo TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 CUDA_VISIBLE_DEVICES=
VPY="$(python3 -c 'import sys; print(sys.executable)')"
export VPY
