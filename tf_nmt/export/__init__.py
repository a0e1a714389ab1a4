"""tf_nmt.export: writing exports of a trained model: the string-to-string SavedModel (float
weights, :mod:`.saved_model`; packed low-bit weights, :mod:`.packed_saved_model`) and the
CTranslate2 directory (:mod:`.ctranslate2`, with its vocabulary map :mod:`.ct2_vmap`). What a
reader of an export needs lives in :mod:`tf_nmt.inference`."""
