"""Scripts that tests/parallel launches under horovodrun."""
