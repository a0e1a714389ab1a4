"""tf_nmt.commands: one typed function per ``tf-nmt`` verb.

The CLI (:mod:`tf_nmt.cli`) only parses and calls these; the quickstart
(:mod:`tf_nmt.commands.quickstart`) and the experiments compose the same functions instead of
re-implementing them. Each takes typed arguments (never an ``argparse.Namespace``), refuses what
it would ignore with one :class:`~tf_nmt.errors.UsageError` line, and has the CLI's defaults.

* :mod:`.prepare`: ``prepare-data`` (built-in corpus or your own files);
* :mod:`.train`: ``train`` (one process, horovodrun, elastic) and ``train-async``;
* :mod:`.evaluate`: ``evaluate``;
* :mod:`.average`: ``average-checkpoints``;
* :mod:`.translate`: ``translate`` (a run, a SavedModel or a CTranslate2 export);
* :mod:`.export`: ``export`` (SavedModel, packed low-bit SavedModel, CTranslate2);
* :mod:`.quantize`: ``quantize`` (and :mod:`.quantized_runs`: a run's weights to a packed file);
* :mod:`.quickstart`: the main job, composed of the verbs above.
"""
