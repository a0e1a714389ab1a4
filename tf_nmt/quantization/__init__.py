"""Log-quantised models: which weights to quantise, quantising them, a packed B-bit checkpoint
format, re-training under quantisation with error feedback, and a packed-weight SavedModel."""
