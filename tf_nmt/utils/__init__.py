"""Helpers shared across tf-nmt that depend on nothing else in the package (no TensorFlow)."""
