"""tf_nmt.export: the string-to-string SavedModel (float and packed low-bit weights)."""

#: Sentences per length-sorted chunk that an export decodes at a time (``tf-nmt export
#: --chunk-size``; 0 decodes each request whole). 16 is the measured best on the quickstart model
#: (``experiments/serving_speed/results/serving_speed_chunks.json``): 1.23-1.59x the unchunked export for mixed-length
#: requests of 32-64 sentences, 1.13-1.22x for long sentences, 0.95-0.97x for medium ones, and no
#: change for requests of at most 16 sentences, which are one chunk.
SERVING_CHUNK_SIZE = 16

#: In a SavedModel export: which weights it holds (raw or EMA), from which run, in which languages.
EXPORT_WEIGHTS_RECORD = "tf_nmt_weights.json"
