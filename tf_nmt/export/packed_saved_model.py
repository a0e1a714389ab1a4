"""A SavedModel whose stored weights are the packed B-bit codes (plus per-tensor scales and the
float32 tensors the policy keeps), dequantised inside the serving graph with stock TF ops.

The serving signature is the same as the float32 export (``texts -> translations``, tokenisation
and beam search in-graph) and loads with only ``tensorflow`` + ``tensorflow_text``.

How the model reads packed weights: the Keras model is not attached to the exported module (so its
float32 variables are not saved). While the serving function is traced, every layer attribute that
holds a model variable (``kernel``, ``embeddings``, ``gamma``, ...) is temporarily replaced by the
dequantised tensor, so the traced graph computes with tensors derived from the packed uint8
variables. Tracing fails loudly if any float32 model variable is still read.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tf_nmt.compat import all_layers, keras, tf, tf_variable, variable_name
from tf_nmt.data.tokenizer import Tokenizers
from tf_nmt.inference.serving_graph import translate_graph
from tf_nmt.inference.formats import SERVING_CHUNK_SIZE
from tf_nmt.data.prepared import BUILTIN_LANGUAGES
from tf_nmt.export.saved_model import (attach_tokenizers, directory_bytes, language_pair_function,
                                       save_translator)
from tf_nmt.models.activation_quant import use_engine
from tf_nmt.quantization.codec import decode_tf
from tf_nmt.quantization.packed_file import PackedModel
from tf_nmt.quantization.packing import pack_codes, unpack_codes_tf
from tf_nmt.quantization.quantize import check_matches

Slot = Tuple[object, str]


def variable_slots(model: keras.Model) -> List[List[Slot]]:
    """For each of ``model.weights``, the (layer, attribute) pairs that hold it (matched by
    identity: Keras 3's variables are no ``tf.Variable``, and its Dense keeps ``_kernel``)."""
    weights = model.weights  # alive while indexed, so an id is one of them
    index = {id(w): i for i, w in enumerate(weights)}
    slots: List[List[Slot]] = [[] for _ in weights]
    for layer in all_layers(model):
        for attr, value in vars(layer).items():
            if id(value) in index:
                slots[index[id(value)]].append((layer, attr))
    missing = [variable_name(weights[i]) for i, s in enumerate(slots) if not s]
    if missing:
        raise ValueError(f"cannot find the layer attributes holding {missing}")
    return slots


@contextlib.contextmanager
def swapped(slots: List[List[Slot]], tensors: List[tf.Tensor]) -> Iterator[None]:
    """Temporarily point every slot at its tensor (bypassing Keras attribute tracking)."""
    saved = [(layer, attr, getattr(layer, attr)) for group in slots for layer, attr in group]
    try:
        for group, tensor in zip(slots, tensors):
            for layer, attr in group:
                object.__setattr__(layer, attr, tensor)
        yield
    finally:
        for layer, attr, value in saved:
            object.__setattr__(layer, attr, value)


class PackedTranslator(tf.Module):
    """Packed weights + tokenizer + a string-to-string ``serve`` function."""

    def __init__(self, model: keras.Model, tokenizer: Tokenizers, packed: PackedModel,
                 beam_size: int, length_penalty: float, max_source_length: int = 256,
                 chunk_size: int = SERVING_CHUNK_SIZE,
                 languages: Sequence[str] = BUILTIN_LANGUAGES) -> None:
        super().__init__(name="packed_translator")
        self.languages = language_pair_function(languages)
        check_matches(model, packed.entries)
        policy = packed.policy
        attach_tokenizers(self, tokenizer)
        self.bits = tf.constant(policy.bits)
        # Three variables in all (one code stream, one scale vector, one float32 vector) keep the
        # graph and its save/restore functions small; per-tensor boundaries are graph constants.
        quantized = [e for e in packed.entries if e.quantized]
        kept = [e for e in packed.entries if not e.quantized]
        q_sizes, k_sizes = [e.size for e in quantized], [e.size for e in kept]
        stream = np.concatenate([e.codes.ravel() for e in quantized] or [np.zeros(0, np.uint8)])
        self.codes = tf.Variable(pack_codes(stream.astype(np.uint8), policy.bits), trainable=False, name="codes")
        self.scales = tf.Variable(np.array([e.scale for e in quantized], np.float32), trainable=False,
                                  name="scales")
        self.kept = tf.Variable(np.concatenate([e.values.ravel() for e in kept] or [np.zeros(0)])
                                .astype(np.float32), trainable=False, name="kept")
        slots = variable_slots(model)
        model_vars = {tf_variable(v).ref() for v in model.weights}

        def weights() -> List[tf.Tensor]:
            parts = {"packed": [], "kept": []}
            if quantized:
                codes = unpack_codes_tf(self.codes, int(sum(q_sizes)), policy.bits)
                scales = tf.repeat(self.scales, q_sizes)  # each code's tensor scale
                parts["packed"] = tf.split(decode_tf(codes, scales, policy.bits, policy.kind), q_sizes)
            if kept:
                parts["kept"] = tf.split(self.kept, k_sizes)
            taken = {"packed": iter(parts["packed"]), "kept": iter(parts["kept"])}
            return [tf.reshape(next(taken["packed" if e.quantized else "kept"]), e.shape)
                    for e in packed.entries]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
        def serve(texts: tf.Tensor) -> Dict[str, tf.Tensor]:
            with swapped(slots, weights()):
                return {"translations": translate_graph(model, tokenizer, texts, beam_size,
                                                        length_penalty, max_source_length,
                                                        chunk_size)}

        with use_engine("emulated-stock"):  # quantised matmul inputs with stock ops only
            concrete = serve.get_concrete_function()
        leaked = [v.name for v in concrete.graph.variables if v.ref() in model_vars]
        if leaked:
            raise RuntimeError(f"the serving graph still reads float32 model variables {leaked}")
        self.serve = serve


def export_packed_saved_model(model: keras.Model, tokenizer: Tokenizers, packed: PackedModel,
                              export_dir: Path, beam_size: int = 4, length_penalty: float = 0.6,
                              overwrite: bool = False, chunk_size: int = SERVING_CHUNK_SIZE,
                              languages: Sequence[str] = BUILTIN_LANGUAGES,
                              record: Optional[Mapping[str, Any]] = None) -> Path:
    """Write the packed-weight SavedModel (staged, renamed into place, never silently replaced);
    ``languages``: the run's (source, target), returned by the export's ``languages()``;
    ``record``: what it holds (:func:`tf_nmt.export.saved_model.export_record`)."""
    if Path(export_dir).exists() and not overwrite:  # refuse before building anything
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    translator = PackedTranslator(model, tokenizer, packed, beam_size, length_penalty,
                                  chunk_size=chunk_size, languages=languages)
    return save_translator(translator, export_dir, overwrite, record)


def variables_bytes(export_dir: Path) -> int:
    """Bytes of a SavedModel's ``variables/`` (the stored weights)."""
    return directory_bytes(Path(export_dir) / "variables")
