#!/usr/bin/env bash
# Build Horovod 0.28.1 from source (TensorFlow + Gloo + MPI) into a Python environment.
#
#   scripts/install_horovod.sh [PYTHON]      # default: <repo>/.venv/bin/python
#
# Idempotent: exits early when that Python already imports horovod.tensorflow 0.28.1 with the
# wanted controllers built. Installs OpenMPI from apt (libopenmpi-dev openmpi-bin) when it can;
# without apt (or without root) it falls back to a Gloo-only build and says so.
# TensorFlow >= 2.19 needs extra include dirs plus our header shim (horovod_patches/build_shim)
# because Horovod 0.28.1 predates the XLA header move. Env knobs: HOROVOD_VERSION (0.28.1),
# FORCE=1 (rebuild even when installed), MAKEFLAGS (default -j2).
#
# GPU nodes: HOROVOD_GPU=1 adds NCCL operations (HOROVOD_GPU_OPERATIONS=NCCL) built against the
# NCCL of pip's nvidia-nccl-cu12 (installed by tensorflow[and-cuda]==2.21.0; installed here if
# missing): its include/ and lib/ become HOROVOD_NCCL_INCLUDE / HOROVOD_NCCL_LIB (a libnccl.so
# link next to the package's libnccl.so.2, rpath set). Needs nvcc (CUDA_HOME or on PATH);
# HOROVOD_BUILD_CUDA_CC_LIST defaults to 75,80,90. Without HOROVOD_GPU nothing changes.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${1:-$REPO/.venv/bin/python}"
HVD_VERSION="${HOROVOD_VERSION:-0.28.1}"
export TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2
log() { echo "[install_horovod] $*" >&2; }

[ -x "$PY" ] || { log "no such python: $PY"; exit 2; }
want_gpu="${HOROVOD_GPU:-0}"

# --- 1. OpenMPI (optional: Gloo-only when it cannot be had) -----------------------------------
want_mpi=1
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicxx >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="$(command -v sudo || true)"
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; then
    log "installing OpenMPI from apt"
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -q --no-install-recommends libopenmpi-dev openmpi-bin >/dev/null 2>&1; then
      $SUDO apt-get update -q >/dev/null 2>&1 || true
      $SUDO apt-get install -y -q --no-install-recommends libopenmpi-dev openmpi-bin >/dev/null 2>&1 \
        || { log "WARNING: apt could not install OpenMPI; building Gloo-only"; want_mpi=0; }
    fi
  else
    log "WARNING: apt-get (as root) unavailable; building Horovod with Gloo only (no --mpi)"
    want_mpi=0
  fi
fi

check_build() {  # `horovodrun --check-build` of *this* Python's Horovod
  "$PY" -c 'import sys; from horovod.runner.launch import run_commandline; sys.argv = ["horovodrun", "--check-build"]; run_commandline()' \
    2>&1 | grep -v -e '^I0000' -e 'absl::InitializeLog' || true
}

# --- 2. Skip when the wanted build is already installed -----------------------------------------
check_installed() {
  "$PY" - "$HVD_VERSION" "$want_mpi" "$want_gpu" <<'EOF'
import sys
import horovod
import horovod.tensorflow as hvd
want, want_mpi, want_gpu = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
ok = horovod.__version__ == want and hvd.gloo_built() and (hvd.mpi_built() or not want_mpi)
ok = ok and (bool(hvd.nccl_built()) or not want_gpu)
sys.exit(0 if ok else 1)
EOF
}
if [ "${FORCE:-0}" != "1" ] && check_installed >/dev/null 2>&1; then
  log "horovod $HVD_VERSION already installed for $PY; nothing to do"
  check_build
  exit 0
fi

# --- 3. Build flags -----------------------------------------------------------------------------
TF_INC="$("$PY" -c 'import tensorflow as tf; print(tf.sysconfig.get_include())')"
TF_VER="$("$PY" -c 'import tensorflow as tf; print(tf.__version__)')"
SHIM_INC="$REPO/horovod_patches/build_shim/include"
export CXXFLAGS="${CXXFLAGS:-} -I$TF_INC/external/highwayhash -I$TF_INC/external/farmhash_archive/src -I$SHIM_INC"
export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
if [ "$want_mpi" = 1 ]; then
  export HOROVOD_WITH_MPI=1
else
  export HOROVOD_WITHOUT_MPI=1
fi
export MAKEFLAGS="${MAKEFLAGS:--j2}"

# --- 3b. GPU nodes: NCCL operations against pip's NCCL (HOROVOD_GPU=1 only) ----------------------
if [ "$want_gpu" = 1 ]; then
  NVCC="$(command -v nvcc || true)"
  [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && NVCC="$CUDA_HOME/bin/nvcc"
  [ -n "$NVCC" ] || { log "ERROR: HOROVOD_GPU=1 needs the CUDA toolkit (nvcc on PATH or CUDA_HOME)"; exit 2; }
  nccl_dir() { "$PY" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null; }
  if [ -z "$(nccl_dir)" ]; then
    log "installing nvidia-nccl-cu12 (pip)"
    "$PY" -m pip install -q nvidia-nccl-cu12
  fi
  NCCL_PKG="$(nccl_dir)"
  [ -f "$NCCL_PKG/include/nccl.h" ] && [ -f "$NCCL_PKG/lib/libnccl.so.2" ] \
    || { log "ERROR: no nccl.h / libnccl.so.2 under $NCCL_PKG"; exit 2; }
  NCCL_SHIM="$REPO/build/nccl_shim/lib"  # the linker wants libnccl.so; pip ships libnccl.so.2
  mkdir -p "$NCCL_SHIM"
  ln -sf "$NCCL_PKG/lib/libnccl.so.2" "$NCCL_SHIM/libnccl.so"
  export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
  export HOROVOD_NCCL_INCLUDE="$NCCL_PKG/include" HOROVOD_NCCL_LIB="$NCCL_SHIM"
  export HOROVOD_CUDA_HOME="${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}"
  export HOROVOD_BUILD_CUDA_CC_LIST="${HOROVOD_BUILD_CUDA_CC_LIST:-75,80,90}"
  export LDFLAGS="${LDFLAGS:-} -Wl,-rpath,$NCCL_PKG/lib"
  log "GPU build: NCCL from $NCCL_PKG, CUDA from $HOROVOD_CUDA_HOME, archs $HOROVOD_BUILD_CUDA_CC_LIST"
fi
log "building horovod $HVD_VERSION for TF $TF_VER (mpi=$want_mpi, gpu=$want_gpu, MAKEFLAGS=$MAKEFLAGS); takes minutes"

# --- 4. Build + install -------------------------------------------------------------------------
start=$(date +%s)
"$PY" -m pip install --no-cache-dir --no-build-isolation "horovod==$HVD_VERSION"
log "build+install took $(( $(date +%s) - start )) s"

# --- 5. Verify ----------------------------------------------------------------------------------
check_installed || { log "ERROR: horovod installed but the import/controller check failed"; exit 1; }
check_build
log "done; launch with: horovodrun -np N -H localhost:N [--gloo|--mpi] $PY ... (as root, --mpi"
log "needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; see horovod_patches/mpi_env.py)"
