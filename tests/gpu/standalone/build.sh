#!/usr/bin/env bash
# Builds the stand-alone kernel harness (no TensorFlow): build/standalone/libtfnmt_harness.so.
# Same nvcc flags as custom_ops/build_ops.py (--fmad=false); ARCH defaults to 90 (H100/H200).
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p build/standalone
nvcc -std=c++17 -O3 --fmad=false --expt-relaxed-constexpr -arch="sm_${ARCH:-90}" -Xcompiler -fPIC \
  -Xcompiler -Wall -shared -DGOOGLE_CUDA=1 -Icustom_ops/cc/kernels -x cu \
  custom_ops/cc/kernels/*.cu.cc tests/gpu/standalone/harness_capi.cu.cc \
  -o build/standalone/libtfnmt_harness.so
echo "built build/standalone/libtfnmt_harness.so"
