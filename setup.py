"""Build and install tf-nmt.

The Python package is plain setuptools. The custom TensorFlow ops under ``custom_ops/`` are
compiled by the build step below against the installed TensorFlow (flags from tf.sysconfig), so
TensorFlow must be importable at build time: install with
``pip install --no-build-isolation -e .`` (or ``.``), or for development
``python setup.py build_ext --inplace``. The library lands in ``tf_nmt/ops/_tf_nmt_ops.so``.
CUDA kernels (``*.cu.cc``) are added only when nvcc is found and TensorFlow is built with CUDA
(set ``TF_NMT_CUDA=0`` to skip them); if their compilation fails the CPU-only library is built.
"""
import glob
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

OPS_EXT = "tf_nmt.ops._tf_nmt_ops"
OPS_SOURCES = sorted(glob.glob("custom_ops/cc/ops/*.cc") + glob.glob("custom_ops/cc/kernels/*.cc"))
CPU_SOURCES = [s for s in OPS_SOURCES if not s.endswith(".cu.cc")]
CUDA_SOURCES = [s for s in OPS_SOURCES if s.endswith(".cu.cc")]
HEADERS = glob.glob("custom_ops/cc/kernels/*.h")


def _requirements(path: str) -> list:
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith(("#", "-r"))]


def _run(cmd: list) -> None:
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


class BuildTfOps(build_ext):
    """build_ext that compiles the custom-op library with g++ (and nvcc) instead of distutils."""

    def get_ext_filename(self, fullname: str) -> str:
        if fullname.split(".")[-1] == OPS_EXT.split(".")[-1]:  # no Python ABI tag: not a module
            return os.path.join(*fullname.split(".")) + ".so"
        return super().get_ext_filename(fullname)

    def build_extension(self, ext: Extension) -> None:
        if ext.name != OPS_EXT:
            super().build_extension(ext)
            return
        target = self.get_ext_fullpath(ext.name)
        if not self.force and _up_to_date(target, OPS_SOURCES + HEADERS):
            print(f"{target} is up to date")
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = os.path.join(self.build_temp, "tf_nmt_ops")
        os.makedirs(tmp, exist_ok=True)
        _build_ops_library(target, tmp)


def _up_to_date(target: str, sources: list) -> bool:
    return os.path.exists(target) and all(os.path.getmtime(s) <= os.path.getmtime(target) for s in sources)


def _build_ops_library(target: str, tmp: str) -> None:
    """Compile CPU (and, if possible, CUDA) kernels and link them into ``target``."""
    import tensorflow as tf  # needs --no-build-isolation

    cflags = tf.sysconfig.get_compile_flags()
    lflags = tf.sysconfig.get_link_flags()
    base = ["-O3", "-fPIC", "-DNDEBUG", "-Icustom_ops/cc/kernels", "-Wno-sign-compare",
            "-Wno-deprecated-declarations", "-Wno-interference-size"] + cflags
    nvcc = shutil.which("nvcc")
    want_cuda = (bool(CUDA_SOURCES) and nvcc and tf.test.is_built_with_cuda()
                 and os.environ.get("TF_NMT_CUDA", "1") != "0")
    if want_cuda:
        try:
            _compile_and_link(target, tmp, base, lflags, nvcc)
            _check_loads(target)
            return
        except (subprocess.CalledProcessError, OSError) as err:
            print(f"warning: CUDA build failed ({err}); building the CPU-only library", file=sys.stderr)
    _compile_and_link(target, tmp, base, lflags, None)


def _check_loads(target: str) -> None:
    """Load the freshly linked library in a child process (raises CalledProcessError if it fails)."""
    code = f"import tensorflow as tf; tf.load_op_library({os.path.abspath(target)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def _cuda_home(nvcc: str) -> str:
    """The CUDA toolkit root: $CUDA_HOME/$CUDA_PATH, next to nvcc, or /usr/local/cuda*."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "/usr/local/cuda",
                  *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for home in filter(None, candidates):
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    raise OSError("CUDA headers (cuda_runtime.h) not found; set CUDA_HOME")


def _compile_and_link(target: str, tmp: str, flags: list, lflags: list, nvcc) -> None:
    """g++ for *.cc (plus nvcc for *.cu.cc and -DGOOGLE_CUDA=1 when ``nvcc`` is given), then link."""
    suffix = ".cuda.o" if nvcc else ".o"
    link_extra = []
    sources = list(CPU_SOURCES)
    if nvcc:
        cuda_home = _cuda_home(nvcc)
        flags = flags + ["-DGOOGLE_CUDA=1", f"-I{cuda_home}/include"]
        link_extra = [f"-L{cuda_home}/lib64", "-lcudart_static", "-ldl", "-lrt", "-lpthread"]
        sources += CUDA_SOURCES
    jobs = []
    for src in sources:
        obj = os.path.join(tmp, os.path.basename(src) + suffix)
        if src.endswith(".cu.cc"):
            jobs.append([nvcc, "-std=c++17", "-O3", "-x", "cu", "--expt-relaxed-constexpr",
                         "-Xcompiler", "-fPIC", *[f for f in flags if f.startswith(("-I", "-D"))],
                         "-c", src, "-o", obj])
        else:
            jobs.append(["g++", *flags, "-c", src, "-o", obj])
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(_run, jobs))
    objects = [job[-1] for job in jobs]
    _run(["g++", "-shared", "-o", target, *objects, *lflags, *link_extra])


setup(
    name="tf-nmt",
    version="0.1.0",
    description="Fast, distributed neural machine translation on TensorFlow/Keras 2 with Horovod",
    packages=find_packages(include=["tf_nmt", "tf_nmt.*", "horovod_patches", "horovod_patches.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=_requirements("requirements.txt"),
    extras_require={"test": ["pytest==9.2.0", "hypothesis==6.170.15"]},
    entry_points={"console_scripts": ["tf-nmt=tf_nmt.cli:main"]},
    include_package_data=True,
    ext_modules=[Extension(OPS_EXT, sources=OPS_SOURCES)],
    cmdclass={"build_ext": BuildTfOps},
)
