"""Transfer learning as initialisation: start a child run from a trained parent model.

All inner layers (every variable outside the shared embedding) are copied from the parent, which
must have the same model kind and the same variable shapes. The vocabulary-indexed variables
(embedding matrix and output bias) are filled row by row through a child-row -> parent-row map
chosen by one of four strategies; rows without a parent row keep the child's own fresh
initialisation:

* ``token-match``: a child row takes the parent row of the identical SentencePiece piece;
* ``exclude``: no row is copied (all embeddings fresh, only inner layers transferred);
* ``random``: the parent's ordinary rows are assigned to the child's by a seeded permutation;
* ``frequency``: rows are paired by frequency rank. The rank comes from the SentencePiece piece
  scores (unigram log-probabilities learned on each side's training data), used as a frequency
  proxy so that the parent's corpus need not be present. Byte-fallback pieces carry no score
  (0) and so pair with each other in id order.

In every strategy but ``exclude`` the special pieces (pad, unk, bos, eos: fixed ids shared by all
vocabularies) map to themselves. Initialisation happens only on a fresh run, never on resume.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import sentencepiece as spm

from tf_nmt.compat import all_layers, keras, tf, variable_name
from tf_nmt.config import Config, load_config
from tf_nmt.errors import UserError
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer
from tf_nmt.models.embedding import SharedEmbedding
from tf_nmt.run_dir import RunDir, build_initialised_model, check_keras
from tf_nmt.utils.io import write_json_atomic

STRATEGIES = ("token-match", "exclude", "random", "frequency")
SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


class TransferError(UserError, ValueError):
    """The parent cannot initialise this child (missing, other kind, other variable shapes)."""


@dataclass(frozen=True)
class ParentRef:
    """A resolved parent: its run directory and the checkpoint prefix to read."""

    run_dir: Path
    checkpoint: str


@dataclass
class TransferReport:
    """What was copied: numbers for the log and the run directory's ``init_from.json``."""

    parent_run_dir: str
    parent_checkpoint: str
    strategy: str
    copied_variables: int
    child_vocab_size: int
    parent_vocab_size: int
    mapped_rows: int

    def to_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise TransferError(f"unknown embedding strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


def resolve_parent(path: str) -> ParentRef:
    """Resolve a run directory (its latest checkpoint) or a checkpoint prefix inside a run dir."""
    p = Path(path)
    run = RunDir(p)
    if run.config_path.is_file():
        prefix = run.latest_checkpoint()
        if prefix is None:
            raise TransferError(f"parent run {p} has no checkpoint in {run.checkpoints}")
        return ParentRef(p, prefix)
    if Path(f"{path}.index").is_file():
        for candidate in p.parents:
            if RunDir(candidate).is_run():
                return ParentRef(candidate, str(p))
        raise TransferError(f"checkpoint {path} is not inside a tf-nmt run directory "
                            "(no config.yaml and vocab.model above it)")
    raise TransferError(f"--init-from {path}: neither a run directory (with config.yaml) nor a "
                        "checkpoint prefix (with a .index file)")


def _pieces(proto: bytes) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_proto=proto)


def _ordinary_ids(sp) -> List[int]:
    """Ids of every piece except the fixed specials (pad/unk/bos/eos)."""
    return [i for i in range(sp.get_piece_size()) if i not in SPECIAL_IDS]


def embedding_row_map(parent_proto: bytes, child_proto: bytes, strategy: str,
                      seed: int = 0) -> np.ndarray:
    """``rows[i]`` = the parent row that initialises child row ``i``, or -1 (keep fresh)."""
    check_strategy(strategy)
    parent, child = _pieces(parent_proto), _pieces(child_proto)
    rows = np.full(child.get_piece_size(), -1, dtype=np.int64)
    if strategy == "exclude":
        return rows
    for i in SPECIAL_IDS:
        if i < len(rows) and i < parent.get_piece_size():
            rows[i] = i
    child_ids, parent_ids = _ordinary_ids(child), _ordinary_ids(parent)
    if strategy == "token-match":
        by_piece = {parent.id_to_piece(i): i for i in parent_ids}
        for i in child_ids:
            rows[i] = by_piece.get(child.id_to_piece(i), -1)
    elif strategy == "random":
        shuffled = np.random.default_rng(seed).permutation(np.asarray(parent_ids, dtype=np.int64))
        n = min(len(child_ids), len(shuffled))
        rows[np.asarray(child_ids[:n], dtype=np.int64)] = shuffled[:n]
    else:  # frequency: rank by piece score (highest first), ties in id order
        def ranked(sp, ids):
            return sorted(ids, key=lambda i: (-sp.get_score(i), i))

        for c, p in zip(ranked(child, child_ids), ranked(parent, parent_ids)):
            rows[c] = p
    return rows


def vocab_variables(model: keras.Model) -> List[tf.Variable]:
    """The model's vocabulary-indexed variables (shared embedding matrix and output bias)."""
    found: List[tf.Variable] = []
    for layer in all_layers(model):
        if isinstance(layer, SharedEmbedding):
            found += list(layer.weights)
    return found


def _name(var: tf.Variable) -> str:
    return variable_name(var)


def pair_variables(parent: keras.Model, child: keras.Model
                   ) -> List[Tuple[tf.Variable, tf.Variable, bool]]:
    """(parent var, child var, is_vocab) for every child variable; TransferError on a mismatch."""
    p_vars, c_vars = list(parent.weights), list(child.weights)
    vocab_ids = {id(v) for v in vocab_variables(child)}
    if len(p_vars) != len(c_vars):
        p_names, c_names = {_name(v) for v in p_vars}, {_name(v) for v in c_vars}
        only = sorted(c_names - p_names)[:3] or sorted(p_names - c_names)[:3]
        raise TransferError(f"parent and child architectures differ: parent has {len(p_vars)} "
                            f"variables, child {len(c_vars)} (e.g. {only} on one side only)")
    pairs = []
    for p, c in zip(p_vars, c_vars):
        if _name(p) != _name(c):
            raise TransferError(f"parent and child architectures differ: child variable "
                                f"{_name(c)} faces parent variable {_name(p)}")
        is_vocab = id(c) in vocab_ids
        p_shape, c_shape = tuple(p.shape), tuple(c.shape)
        if (p_shape[1:] != c_shape[1:]) if is_vocab else (p_shape != c_shape):
            raise TransferError(f"parent and child architectures differ at variable {_name(c)}: "
                                f"parent shape {list(p_shape)}, child shape {list(c_shape)}")
        pairs.append((p, c, is_vocab))
    return pairs


def transfer_weights(parent: keras.Model, child: keras.Model, rows: np.ndarray) -> int:
    """Copy inner variables and mapped vocabulary rows from ``parent`` into ``child``."""
    pairs = pair_variables(parent, child)
    mapped = rows >= 0
    for p, c, is_vocab in pairs:
        value = p.numpy()
        if is_vocab:
            if rows.max(initial=-1) >= value.shape[0]:
                raise TransferError(f"row map points past the parent's {value.shape[0]} rows")
            fresh = c.numpy()
            fresh[mapped] = value[rows[mapped]]
            value = fresh
        c.assign(value.astype(tf.as_dtype(c.dtype).as_numpy_dtype))
    return len(pairs)


@dataclass
class PreparedParent:
    """A parent loaded and checked against the child's architecture, with its embedding row map."""

    ref: ParentRef
    model: keras.Model
    rows: np.ndarray
    strategy: str
    parent_vocab_size: int


def prepare_parent(ref: ParentRef, child_vocab_proto: bytes, model_kind: str,
                   model_hparams: Dict[str, object], strategy: str, seed: int = 0) -> PreparedParent:
    """Load the parent and check it fits the child (kind, every variable shape), before the child
    run writes anything. Builds a throwaway child-shaped model for the shape check."""
    check_strategy(strategy)
    parent_run = RunDir(ref.run_dir)
    parent_cfg = load_config(parent_run.config_path)
    check_keras(parent_run)
    if parent_cfg.model.kind != model_kind:
        raise TransferError(f"parent {ref.run_dir} is a {parent_cfg.model.kind} model but this "
                            f"run trains a {model_kind}")
    if parent_run.source_vocab_path.is_file():
        raise TransferError(f"parent {ref.run_dir} was trained with separate source/target "
                            "vocabularies, which transfer learning does not map; use a parent "
                            "trained with a shared vocabulary")
    parent_proto = parent_run.vocab_path.read_bytes()
    parent_size = _pieces(parent_proto).get_piece_size()
    # Not run.load_trained_model: that also creates a tensorflow-text tokenizer, and dropping a
    # second SentencePiece resource can invalidate the child's.
    parent_model = build_initialised_model(parent_cfg.model.kind, parent_size, parent_cfg.model.hparams)
    tf.train.Checkpoint(model=parent_model).restore(ref.checkpoint).expect_partial() \
        .assert_existing_objects_matched()
    rows = embedding_row_map(parent_proto, child_vocab_proto, strategy, seed)
    pair_variables(parent_model, build_initialised_model(model_kind, len(rows), model_hparams))
    return PreparedParent(ref, parent_model, rows, strategy, parent_size)


def apply_parent(child: keras.Model, parent: PreparedParent,
                 log: Callable[[str], None] = print) -> TransferReport:
    """Copy ``parent`` into the built ``child``: inner layers, then mapped embedding rows."""
    copied = transfer_weights(parent.model, child, parent.rows)
    rows = parent.rows
    report = TransferReport(str(parent.ref.run_dir), parent.ref.checkpoint, parent.strategy, copied,
                            len(rows), parent.parent_vocab_size, int((rows >= 0).sum()))
    log(f"initialised from {parent.ref.checkpoint}: {copied} variables, embeddings "
        f"'{parent.strategy}': {report.mapped_rows}/{len(rows)} rows from the parent, the rest fresh")
    return report


def initialize_from_parent(child: keras.Model, child_vocab_proto: bytes, model_kind: str,
                           model_hparams: Dict[str, object], parent_path: str, strategy: str,
                           seed: int = 0, log: Callable[[str], None] = print) -> TransferReport:
    """Resolve, load, check and apply ``parent_path`` to the built ``child`` in one call."""
    prepared = prepare_parent(resolve_parent(parent_path), child_vocab_proto, model_kind,
                              model_hparams, strategy, seed)
    return apply_parent(child, prepared, log=log)


def prepare_run(cfg: Config, tokenizer: SubwordTokenizer) -> PreparedParent:
    """The trainer's first hook (before anything is written): resolve, load and check the parent.

    Building the parent draws from the seeded global generator, so the child's fresh rows are
    reproducible but not the values a run without ``init_from`` would draw. (Re-seeding here
    is not an option: it clears TensorFlow's kernel cache, which drops the tokenizer's
    SentencePiece resource.)
    """
    t = cfg.train
    return prepare_parent(resolve_parent(t.init_from), tokenizer.model_proto, cfg.model.kind,
                          cfg.model.hparams, t.init_embeddings, seed=t.seed)


def initialize_run(model: keras.Model, parent: PreparedParent, record: Optional[Path],
                   log: Callable[[str], None] = print) -> TransferReport:
    """The trainer's second hook: initialise the built ``model``, record it in ``record``."""
    report = apply_parent(model, parent, log=log)
    if record is not None:
        write_json_atomic(record, report.to_dict())
    return report
