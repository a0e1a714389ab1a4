"""Compile the tf-nmt custom-op library (used by setup.py; also runnable on its own).

CPU kernels (``*.cc``) are compiled with g++ against the installed TensorFlow (flags from
tf.sysconfig). CUDA kernels (``*.cu.cc``, plus the GPU OpKernels in ``*_gpu_kernels.cc``) are
added according to ``TF_NMT_CUDA``:

* unset / ``auto``: built when nvcc is found and TensorFlow is built with CUDA; if that build
  fails, the CPU-only library is built instead and the failure is recorded (see below);
* ``1``: required: no nvcc, a TensorFlow without CUDA or a compiler error is a build error;
* ``0``: skipped.

Whatever happened is written to ``<library>.build.json`` next to the library (``cuda``: whether
GPU kernels are in it, ``cuda_status``: ``built`` / ``disabled`` / ``unavailable`` / ``failed``,
and the reason), which :mod:`tf_nmt.ops.loader` reads: ``gpu_kernels_built()``, and a warning at
load time after a failed CUDA build, so the fallback stays visible under ``pip -q``.

Other knobs: ``TF_NMT_CUDA_ARCHS`` (default ``75;80;90``: SASS for T4, A100 (and 8.x), H100, plus
PTX for newer GPUs), ``TF_NMT_BUILD_JOBS`` (parallel compiles, default: CPU count), ``CUDA_HOME``.

The library holds the ops of ``custom_ops/cc/{ops,kernels}`` only. Experiment-only ops live with
their experiment and are compiled into a library of their own with :func:`build_cpu_library`
(e.g. the Table 7.5 microbenchmark ops: ``experiments/lowprec/cc``, built by
``experiments/lowprec/bench_ops.py`` on first use).

Stand-alone (e.g. a compile check into another path, leaving the installed library alone)::

    python custom_ops/build_ops.py --out build/gpu_check/_tf_nmt_ops.so --cuda 1
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join("custom_ops", "cc", "kernels")
DEFAULT_ARCHS = "75;80;90"


def _rel(paths: List[str]) -> List[str]:
    return sorted(os.path.relpath(p, ROOT) for p in paths)


OPS_SOURCES = _rel(glob.glob(os.path.join(ROOT, "custom_ops/cc/ops/*.cc"))
                   + glob.glob(os.path.join(ROOT, KERNELS, "*.cc")))
CPU_SOURCES = [s for s in OPS_SOURCES if not s.endswith(".cu.cc")]
CUDA_SOURCES = [s for s in OPS_SOURCES if s.endswith(".cu.cc")]
HEADERS = _rel(glob.glob(os.path.join(ROOT, KERNELS, "*.h")))


class CudaBuildError(RuntimeError):
    """TF_NMT_CUDA=1 and the CUDA kernels could not be built."""


def build_info_path(library: str) -> str:
    """``<dir>/_tf_nmt_ops.build.json`` for ``<dir>/_tf_nmt_ops.so``."""
    return os.path.splitext(library)[0] + ".build.json"


def cuda_setting() -> str:
    """``auto``, ``1`` (required) or ``0`` (skip) from $TF_NMT_CUDA."""
    value = os.environ.get("TF_NMT_CUDA", "auto").strip().lower()
    if value in ("", "auto"):
        return "auto"
    if value in ("1", "true", "yes", "on"):
        return "1"
    if value in ("0", "false", "no", "off"):
        return "0"
    raise CudaBuildError(f"TF_NMT_CUDA must be 0, 1 or auto, got {value!r}")


def _run(cmd: List[str]) -> None:
    """Runs a compiler; on failure raises CalledProcessError carrying its output."""
    print(" ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.stdout:
        print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd, output=proc.stdout)


def cuda_home(nvcc: str) -> str:
    """The CUDA toolkit root: $CUDA_HOME/$CUDA_PATH, next to nvcc, or /usr/local/cuda*."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "/usr/local/cuda",
                  *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for home in filter(None, candidates):
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    raise OSError("CUDA headers (cuda_runtime.h) not found; set CUDA_HOME")


def gencode_flags(archs: Optional[str] = None) -> List[str]:
    """``-gencode`` flags: SASS for each arch in TF_NMT_CUDA_ARCHS, PTX for the newest."""
    items = [a.strip() for a in (archs or os.environ.get("TF_NMT_CUDA_ARCHS") or DEFAULT_ARCHS)
             .replace(",", ";").split(";") if a.strip()]
    if not items or not all(a.isdigit() for a in items):
        raise CudaBuildError(f"TF_NMT_CUDA_ARCHS must list compute capabilities like 80;90, got {archs!r}")
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in items]
    newest = max(items, key=int)
    return flags + [f"-gencode=arch=compute_{newest},code=compute_{newest}"]


def nvcc_command(nvcc: str, src: str, obj: str, flags: List[str]) -> List[str]:
    """The nvcc command for one ``*.cu.cc`` (no FMA contraction: results must equal the CPU's)."""
    return [nvcc, "-std=c++17", "-O3", "-x", "cu", "--expt-relaxed-constexpr", "--fmad=false",
            "-Xcompiler", "-fPIC", *gencode_flags(), *[f for f in flags if f.startswith(("-I", "-D"))],
            "-c", src, "-o", obj]


def _tf_flags():
    import tensorflow as tf  # needs --no-build-isolation

    cflags = tf.sysconfig.get_compile_flags()
    lflags = tf.sysconfig.get_link_flags()
    base = ["-O3", "-fPIC", "-DNDEBUG", f"-I{KERNELS}", "-Wno-sign-compare",
            "-Wno-deprecated-declarations", "-Wno-interference-size"] + cflags
    return tf, base, lflags


def compile_and_link(target: str, tmp: str, flags: List[str], lflags: List[str],
                     nvcc: Optional[str], sources: Optional[List[str]] = None) -> None:
    """g++ for *.cc (plus nvcc for *.cu.cc and -DGOOGLE_CUDA=1 when ``nvcc`` is given), then link.
    ``sources`` (paths relative to the checkout, or absolute) replaces the library's own
    (CPU_SOURCES, plus CUDA_SOURCES with ``nvcc``)."""
    suffix = ".cuda.o" if nvcc else ".o"
    link_extra: List[str] = []
    own = sources is None
    sources = list(CPU_SOURCES if own else sources)
    if nvcc:
        home = cuda_home(nvcc)
        flags = flags + ["-DGOOGLE_CUDA=1", f"-I{home}/include"]
        link_extra = [f"-L{home}/lib64", "-lcudart_static", "-ldl", "-lrt", "-lpthread"]
        if own:
            sources += CUDA_SOURCES
    os.makedirs(tmp, exist_ok=True)
    jobs = []
    for src in sources:
        obj = os.path.join(tmp, os.path.basename(src) + suffix)
        if src.endswith(".cu.cc"):
            jobs.append(nvcc_command(nvcc, src, obj, flags))
        else:
            jobs.append(["g++", *flags, "-c", src, "-o", obj])
    workers = int(os.environ.get("TF_NMT_BUILD_JOBS") or os.cpu_count() or 2)
    # Longest first (nvcc), so the parallel compiles finish together.
    jobs.sort(key=lambda job: 0 if job[0] == nvcc else 1)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(_run, jobs))
    objects = [job[-1] for job in jobs]
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    _run(["g++", "-shared", "-o", target, *objects, *lflags, *link_extra])


def build_cpu_library(target: str, tmp: str, sources: List[str]) -> None:
    """Compiles ``sources`` (``*.cc``; relative to the checkout, or absolute) into the CPU-only op
    library ``target`` with this library's flags (its headers in custom_ops/cc/kernels are on the
    include path), objects under ``tmp``. For op libraries kept out of tf-nmt's own, such as the
    lowprec microbenchmark ops (experiments/lowprec/bench_ops.py)."""
    _, flags, lflags = _tf_flags()
    compile_and_link(os.path.abspath(target), os.path.abspath(tmp), flags, lflags, None, sources)


def check_loads(target: str) -> None:
    """Load the freshly linked library in a child process (raises CalledProcessError if it fails)."""
    code = f"import tensorflow as tf; tf.load_op_library({os.path.abspath(target)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, code, output=proc.stderr[-4000:])


def _write_info(target: str, info: dict) -> None:
    with open(build_info_path(target), "w") as handle:
        json.dump(info, handle, indent=2, sort_keys=True)
        handle.write("\n")


def _error_text(err: Exception) -> str:
    out = getattr(err, "output", None)
    return f"{err}\n{out[-4000:]}" if out else str(err)


def build_ops_library(target: str, tmp: str) -> dict:
    """Builds ``target`` as TF_NMT_CUDA says; returns (and writes) the build record."""
    target, tmp = os.path.abspath(target), os.path.abspath(tmp)
    setting = cuda_setting()
    tf, base, lflags = _tf_flags()
    nvcc = shutil.which("nvcc")
    tf_cuda = bool(tf.test.is_built_with_cuda())
    info = {"cuda": False, "cuda_setting": setting, "tensorflow": tf.__version__,
            "tensorflow_cuda": tf_cuda, "nvcc": nvcc}
    if setting == "0":
        info.update(cuda_status="disabled", reason="TF_NMT_CUDA=0")
    elif not CUDA_SOURCES:
        info.update(cuda_status="unavailable", reason="no CUDA sources")
    elif not nvcc or not tf_cuda:
        reason = "nvcc not found on PATH" if not nvcc else "TensorFlow is not built with CUDA"
        if setting == "1":
            raise CudaBuildError(f"TF_NMT_CUDA=1 but {reason}")
        info.update(cuda_status="unavailable", reason=reason)
    else:
        info["cuda_archs"] = os.environ.get("TF_NMT_CUDA_ARCHS") or DEFAULT_ARCHS
        try:
            compile_and_link(target, tmp, base, lflags, nvcc)
            check_loads(target)
            info.update(cuda=True, cuda_status="built", reason="")
            _write_info(target, info)
            return info
        except (subprocess.CalledProcessError, OSError) as err:
            if setting == "1":
                raise CudaBuildError(f"TF_NMT_CUDA=1 and the CUDA build failed: {_error_text(err)}") from err
            info.update(cuda_status="failed", reason=_error_text(err))
            print("=" * 78 + "\nWARNING: tf-nmt CUDA kernels failed to build; building the CPU-only "
                  f"library (GPU ops will run on the CPU). Reason:\n{info['reason']}\n"
                  "Set TF_NMT_CUDA=1 to make this an error, TF_NMT_CUDA=0 to skip CUDA.\n"
                  + "=" * 78, file=sys.stderr, flush=True)
    compile_and_link(target, tmp, base, lflags, None)
    _write_info(target, info)
    return info


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Build the tf-nmt custom-op library.")
    parser.add_argument("--out", required=True, help="library path, e.g. build/gpu_check/_tf_nmt_ops.so")
    parser.add_argument("--tmp", help="object directory (default: <out dir>/obj)")
    parser.add_argument("--cuda", choices=["auto", "0", "1"], help="overrides $TF_NMT_CUDA")
    args = parser.parse_args(argv)
    if args.cuda:
        os.environ["TF_NMT_CUDA"] = args.cuda
    tmp = args.tmp or os.path.join(os.path.dirname(os.path.abspath(args.out)), "obj")
    try:
        info = build_ops_library(args.out, tmp)
    except CudaBuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
