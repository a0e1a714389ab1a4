#!/usr/bin/env bash
# On the device-tool machine, after the .carry* folders were stashed in /tmp/stash (README.md):
# unpack the site into /tmp/site, build Horovod (Gloo) and tf-nmt's ops against it, copy the
# checkout to /tmp/repo (runs there do not see later edits of the working tree) and the corpus
# to /tmp/data_cache. Idempotent. Afterwards: source scripts/device/env.sh.
set -euo pipefail
T0=$(date +%s)
mkdir -p /tmp/stash && cp .carry0/* /tmp/stash/
mkdir -p /tmp/zbin /tmp/res && cp /tmp/stash/zstd /tmp/stash/lib*.so* /tmp/zbin/ 2>/dev/null || true
export PATH=/tmp/zbin:$PATH LD_LIBRARY_PATH=/tmp/zbin
if [ ! -d /tmp/site ]; then
  cat /tmp/stash/site.part* | zstd -d --long=27 | tar xf - -C /tmp
  # tensorflow-cpu's metadata under the name the stack asks for
  for d in /tmp/site/tensorflow_cpu-*.dist-info; do
    t="/tmp/site/tensorflow-${d#/tmp/site/tensorflow_cpu-}"
    cp -r "$d" "$t" && sed -i 's/^Name: tensorflow.cpu$/Name: tensorflow/' "$t/METADATA"
  done
fi
rm -rf /tmp/repo && mkdir -p /tmp/repo && cp -r . /tmp/repo/ && rm -rf /tmp/repo/.carry*
cd /tmp/repo
source scripts/device/env.sh
"$VPY" -m pip install -q --no-index --no-deps --upgrade /tmp/stash/setuptools-*.whl
"$VPY" -c "import tensorflow as tf, tensorflow_text, tf_keras; print('tensorflow', tf.__version__)"
mkdir -p /tmp/data_cache && zstd -dc /tmp/stash/data_cache.tar.zst | tar xf - -C /tmp/data_cache
if ! "$VPY" -c "import horovod.tensorflow" 2>/dev/null; then
  TF_INC="$("$VPY" -c 'import tensorflow as tf; print(tf.sysconfig.get_include())')"
  # gcc 13 there: Horovod 0.28.1's headers miss these includes; CMake 4 there: old minimums.
  export CXXFLAGS="-include cstdint -include string -include stdexcept -include limits -include functional \
-I$TF_INC/external/highwayhash -I$TF_INC/external/farmhash_archive/src -I$PWD/horovod_patches/build_shim/include"
  export CMAKE_POLICY_VERSION_MINIMUM=3.5 HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j"$(nproc)"
  "$VPY" -m pip install -q --no-index --no-deps --no-build-isolation /tmp/stash/horovod-*.tar.gz \
    > /tmp/res/build.log 2>&1 || { grep -n -i -E "CMake Error|error" -A3 /tmp/res/build.log | head -40; exit 1; }
fi
# The ops in place (pip's editable install would fetch build requirements); a tf-nmt launcher
# next to the interpreter, where the studies look for it.
TF_NMT_CUDA=0 TF_NMT_BUILD_JOBS="$(nproc)" "$VPY" setup.py build_ext --inplace > /tmp/res/build.log 2>&1 \
  || { grep -n -i "error" -A3 /tmp/res/build.log | head -40; exit 1; }
printf '#!%s\nimport sys\nfrom tf_nmt.cli import main\nsys.exit(main())\n' "$VPY" > "$(dirname "$VPY")/tf-nmt"
chmod +x "$(dirname "$VPY")/tf-nmt"
"$VPY" -c "import tf_nmt.ops.loader as l; l.load_ops(); import horovod.tensorflow as hvd; assert hvd.gloo_built(); print('tf-nmt ops and horovod (gloo) ready')"
echo "set-up took $(( $(date +%s) - T0 )) s"
