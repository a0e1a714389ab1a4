"""tf_nmt.inference: what a reader of an export needs, and nothing that trains.

* :mod:`~tf_nmt.inference.formats`: the export formats' file names, ids and limits;
* :mod:`~tf_nmt.inference.serving_graph`: the in-graph translation (tokenize, beam search,
  detokenize) that evaluation runs and the SavedModel serves;
* :mod:`~tf_nmt.inference.ctranslate2` and :mod:`~tf_nmt.inference.ct2_backend`: translation
  with a CTranslate2 export, and the choice of its CPU backend.

Training, evaluation and export stand above it as siblings.
"""
