#!/usr/bin/env bash
# Pack what a device-tool machine lacks to run tf-nmt on its CPU: TensorFlow 2.21 (CPU build) and
# the pinned Python stack for Python 3.12, Horovod's source, a static zstd, and the prepared corpus.
# That machine has no TensorFlow and no network, and each call carries at most 64 MiB, so the
# packed site is split over .carry1 .. .carryK (60 MB each); .carry0 holds the rest.
#
#   bash scripts/device/pack.sh            # from a set-up checkout (.venv, data_cache prepared)
#
# Then see scripts/device/README.md for the calls that carry and build it there.
set -euo pipefail
cd "$(dirname "$0")/../.."
VPY=.venv/bin/python
[ -x "$VPY" ] || { echo "run scripts/setup.sh first" >&2; exit 2; }
[ -f data_cache/corpus/train.en ] || { echo "run tf-nmt prepare-data first" >&2; exit 2; }
command -v zstd >/dev/null || { echo "needs zstd (apt-get install zstd)" >&2; exit 2; }
# The same versions as this checkout's .venv (tensorflow-cpu for tensorflow).
NAMES="tensorflow tf-keras tensorflow-text tensorboard numpy protobuf ml-dtypes absl-py gast astunparse
google-pasta termcolor wrapt opt-einsum flatbuffers sentencepiece sacrebleu portalocker tabulate keras
namex optree"
PINS=$("$VPY" -m pip list --format=freeze 2>/dev/null | python3 -c '
import sys
want = {n.lower().replace("_", "-") for n in sys.argv[1].split()}
for line in sys.stdin:
    name, _, version = line.strip().partition("==")
    key = name.lower().replace("_", "-")
    if key in want:
        print(("tensorflow-cpu" if key == "tensorflow" else name) + "==" + version)
' "$NAMES")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$WORK/wheels" $PINS
python3 -m pip download -q --no-deps --no-binary :all: -d "$WORK/extra" horovod==0.28.1
python3 -m pip download -q --no-deps --only-binary=:all: -d "$WORK/extra" "setuptools<81"
mkdir -p "$WORK/site"
for w in "$WORK"/wheels/*.whl; do unzip -q -o "$w" -d "$WORK/site"; done
tar cf - -C "$WORK" site | zstd -q -15 --long=27 -T0 -o "$WORK/site.tar.zst"
rm -rf .carry[0-9]*
(cd "$WORK" && split -b 60000000 -d -a 1 site.tar.zst part)
k=1
for part in "$WORK"/part*; do mkdir -p ".carry$k"; mv "$part" ".carry$k/site.$(basename "$part")"; k=$((k + 1)); done
mkdir -p .carry0
cp "$WORK"/extra/* .carry0/
tar cf - -C data_cache corpus vocab | zstd -q -10 -o .carry0/data_cache.tar.zst
cp "$(command -v zstd)" .carry0/
ldd "$(command -v zstd)" | awk '/=>/ {print $3}' | grep -E 'zstd|lzma|lz4' | xargs -r -I{} cp -L {} .carry0/
du -sh .carry*
