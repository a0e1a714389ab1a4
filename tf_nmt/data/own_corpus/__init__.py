"""A user's own parallel corpus, prepared at any scale: ``tf-nmt prepare-data --train-src ...``.

The modules, in the order the driver (:mod:`.prepare`) uses them: :mod:`.inputs` streams and
validates the files, :mod:`.clean` decides which pairs are kept, :mod:`.heldout` carves or reads
dev/test, :mod:`.buckets` spreads the train pairs over shard buckets, :mod:`.vocab` learns (or
checks) the SentencePiece model, :mod:`.shards` encodes the buckets in worker processes
(:mod:`.encode_worker`) into TFRecord shards, :mod:`.staging` keeps the resumable state.

This package's ``__init__`` imports nothing: the encoding workers import only
:mod:`.encode_worker` (and sentencepiece), never TensorFlow.
"""
