"""Build and install tf-nmt.

The Python package is plain setuptools. The custom TensorFlow ops under ``custom_ops/`` are
compiled by the build step below against the installed TensorFlow (flags from tf.sysconfig), so
TensorFlow must be importable at build time: install with
``pip install --no-build-isolation -e .`` (or ``.``), or for development
``python setup.py build_ext --inplace``. The library lands in ``tf_nmt/ops/_tf_nmt_ops.so``.
CUDA kernels (``*.cu.cc``) follow ``TF_NMT_CUDA`` (see ``custom_ops/build_ops.py``): by default
they are added when nvcc is found and TensorFlow is built with CUDA, and a failed CUDA build falls
back to the CPU-only library (recorded in ``tf_nmt/ops/_tf_nmt_ops.build.json`` and warned about
when the library loads); ``TF_NMT_CUDA=1`` makes any CUDA failure a build error and
``TF_NMT_CUDA=0`` skips CUDA.
"""
import os
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "custom_ops"))
import build_ops  # noqa: E402  (custom_ops/build_ops.py)

OPS_EXT = "tf_nmt.ops._tf_nmt_ops"
OPS_SOURCES = build_ops.OPS_SOURCES
HEADERS = build_ops.HEADERS


def _requirements(path: str) -> list:
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith(("#", "-r"))]


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
        tmp = os.path.join(self.build_temp, "tf_nmt_ops")
        try:
            build_ops.build_ops_library(target, tmp)
        except build_ops.CudaBuildError as err:
            sys.exit(f"error: {err}")

    def _record_mapping(self) -> dict:
        """``{built record: in-place record}`` for the op library (its ``.build.json``)."""
        build_py = self.get_finalized_command("build_py")
        mapping = {}
        for ext in self.extensions:
            if ext.name == OPS_EXT:
                inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
                mapping[build_ops.build_info_path(regular_file)] = build_ops.build_info_path(inplace_file)
        return mapping

    def copy_extensions_to_source(self) -> None:
        """In-place and editable installs copy only the library into the source tree; the build
        record (CUDA kernels in or not, and why a CUDA build fell back) goes beside it too, since
        the loader reads it there."""
        super().copy_extensions_to_source()
        for regular, inplace in self._record_mapping().items():
            if os.path.exists(regular):
                self.copy_file(regular, inplace, level=self.verbose)
            elif os.path.exists(inplace):  # never leave an older build's record beside it
                os.remove(inplace)

    def get_output_mapping(self) -> dict:
        mapping = super().get_output_mapping()
        if self.inplace:
            mapping.update(self._record_mapping())
        return mapping


def _up_to_date(target: str, sources: list) -> bool:
    """Built after every source, and with the CUDA setting asked for now."""
    if not os.path.exists(target) or any(os.path.getmtime(s) > os.path.getmtime(target) for s in sources):
        return False
    try:
        import json

        with open(build_ops.build_info_path(target)) as handle:
            return json.load(handle).get("cuda_setting") == build_ops.cuda_setting()
    except (OSError, ValueError, build_ops.CudaBuildError):
        return False


setup(
    name="tf-nmt",
    version="0.1.0",
    description="Fast, distributed neural machine translation on TensorFlow/Keras 2 with Horovod",
    packages=find_packages(include=["tf_nmt", "tf_nmt.*", "horovod_patches", "horovod_patches.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=_requirements("requirements.txt"),
    extras_require={"test": ["pytest==9.2.0", "hypothesis==6.170.15"],
                    "ctranslate2": ["ctranslate2==4.8.5"]},  # tf-nmt export --format ctranslate2
    entry_points={"console_scripts": ["tf-nmt=tf_nmt.cli:main"]},
    include_package_data=True,
    ext_modules=[Extension(OPS_EXT, sources=OPS_SOURCES)],
    cmdclass={"build_ext": BuildTfOps},
)
