"""Tests of the user guide in docs/: links, cited files and the generated configuration reference."""
