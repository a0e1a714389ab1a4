#!/usr/bin/env python
"""``saved_model_cli`` with the tensorflow-text ops registered.

Plain ``saved_model_cli run`` fails on tf-nmt exports with "Op type not registered
'SentencepieceOp'": the tokeniser ops live in tensorflow_text's shared library, which must be
loaded first. Same arguments as saved_model_cli, e.g.::

    python scripts/saved_model_cli_text.py run --dir exports/t1 --tag_set serve \
        --signature_def serving_default --input_exprs 'texts=["Open the file."]'
"""
import sys

import tensorflow_text  # noqa: F401  (registers SentencepieceOp and friends)
from tensorflow.python.tools import saved_model_cli

if __name__ == "__main__":
    sys.exit(saved_model_cli.main())
