"""A training run: its directory, the guard that keeps a resume consistent, and its model.

Layout: ``config.yaml`` (resolved config), ``vocab.model`` (the target SentencePiece proto,
shared by both sides unless ``source_vocab.model`` exists: a separate-vocabulary run),
``meta.json`` (vocabulary fingerprints, model kind/hparams, world size, languages),
``checkpoints/`` and ``logs/``. Resuming with other languages, different vocabularies, model or
(unless allowed) world size is refused before anything is written.

This is also the one place that builds a model with its variables created
(:func:`build_initialised_model`) and the one that restores a trained run's model
(:func:`load_trained_model`): trainers, transfer learning, quantisation, evaluation and export
all go through it, so it sits in the layer below all of them (above ``models`` and ``data``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import tf_nmt
from tf_nmt.compat import ENV_VAR, KERAS_VERSION, keras, tf
from tf_nmt.config import Config, load_config
from tf_nmt.data.prepared import BUILTIN_LANGUAGES, DataError, PreparedData
from tf_nmt.data.tokenizer import SOURCE_TOKENIZER, SubwordTokenizer, Tokenizers, TokenizerPair
from tf_nmt.errors import UserError
from tf_nmt.models import build_model
from tf_nmt.models.activation_quant import ActivationQuantization, from_train_config
from tf_nmt.models.ema import WEIGHTS, checkpoint_has_ema, restore_ema_weights
from tf_nmt.utils.io import write_json_atomic


class RunDirError(UserError, ValueError):
    """The run directory does not match what this invocation would write into it."""


class _Member:
    """A path inside the run directory, named once (``RunDir.checkpoints`` -> ``root/checkpoints``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: Optional["RunDir"], owner: type) -> Any:
        return self if run is None else run.root / self.name


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory (the only place that knows the file names)."""

    root: Path
    checkpoints = _Member("checkpoints")
    logs = _Member("logs")
    meta_path = _Member("meta.json")
    vocab_path = _Member("vocab.model")  # the target's (and the shared) vocabulary
    source_vocab_path = _Member("source_vocab.model")  # a separate-vocabulary run only
    config_path = _Member("config.yaml")

    def read_meta(self) -> Optional[Dict[str, Any]]:
        if not self.meta_path.is_file():
            return None
        return json.loads(self.meta_path.read_text())

    def has_checkpoint(self) -> bool:
        return (self.checkpoints / "checkpoint").is_file()

    def write_meta(self, meta: Dict[str, Any]) -> None:
        write_json_atomic(self.meta_path, meta)

    def latest_checkpoint(self) -> Optional[str]:
        """Prefix of the newest checkpoint, or None."""
        return tf.train.latest_checkpoint(str(self.checkpoints))

    def languages(self) -> Tuple[str, str]:
        """(source, target) language of the run (meta.json; runs from before it was recorded
        trained the built-in en-de corpus)."""
        return languages_of(self.read_meta())

    def vocabularies(self) -> TokenizerPair:
        """The run's (source, target) tokenizers, checked against ``meta.json``'s fingerprints
        (a swapped or missing model file is one :class:`RunDirError` line)."""
        meta = self.read_meta() or {}
        target = SubwordTokenizer.load(self.vocab_path)
        separate = self.source_vocab_path.is_file()
        source = (SubwordTokenizer.load(self.source_vocab_path, SOURCE_TOKENIZER) if separate
                  else target)
        for what, tokenizer, key in (("vocab.model", target, "vocab_fingerprint"),
                                     ("source_vocab.model", source if separate else None,
                                      "source_vocab_fingerprint")):
            recorded = meta.get(key)
            found = tokenizer.fingerprint if tokenizer is not None else None
            if key in meta and recorded != found:
                raise RunDirError(f"{self.root}: meta.json records {what} {recorded} but the "
                                  f"run holds {found or 'none'}; the run directory was changed")
        return TokenizerPair(source, target)

    def is_run(self) -> bool:
        """True when this looks like a tf-nmt run directory (config and vocabulary present)."""
        return self.config_path.is_file() and self.vocab_path.is_file()


def check_resume(run: RunDir, meta: Dict[str, Any], allow_world_size_change: bool = False) -> bool:
    """Compare this run's ``meta`` with what ``run`` holds. Returns True when resuming.

    Raises :class:`RunDirError` for a different vocabulary or model architecture, and for a
    different world size unless ``allow_world_size_change`` (the effective batch and the
    learning-rate scaling would silently change).
    """
    saved = run.read_meta()
    if saved is None:
        if run.has_checkpoint():
            raise RunDirError(f"{run.root} has checkpoints but no meta.json; refusing to guess "
                              "what they were trained with")
        return False
    check_keras(run, saved)
    converted = saved.get("converted_from")
    if converted and not converted.get("resumable", True):
        raise RunDirError(f"cannot resume {run.root}: it was converted from Keras "
                          f"{converted.get('keras')} for evaluation, export and transfer only "
                          f"({'; '.join(converted.get('why_not_resumable', []))}); continue it "
                          f"in a new run with --init-from {run.root}")
    if languages_of(saved) != languages_of(meta):
        raise RunDirError(
            f"cannot resume {run.root}: it was trained on {'-'.join(languages_of(saved))} but "
            f"this data dir is {'-'.join(languages_of(meta))}. Use a new --run-dir; nothing was "
            "overwritten.")
    if saved.get("vocab_fingerprint") != meta.get("vocab_fingerprint"):
        raise RunDirError(
            f"cannot resume {run.root}: it was trained with vocabulary {saved.get('vocab_fingerprint')} "
            f"but this run uses {meta.get('vocab_fingerprint')} (different data or vocab_size). "
            "Use a new --run-dir; nothing was overwritten.")
    if saved.get("source_vocab_fingerprint") != meta.get("source_vocab_fingerprint"):
        raise RunDirError(
            f"cannot resume {run.root}: it was trained with "
            f"{_vocab_mode(saved.get('source_vocab_fingerprint'))} but this data dir has "
            f"{_vocab_mode(meta.get('source_vocab_fingerprint'))}. Use a new --run-dir; nothing "
            "was overwritten.")
    for key in ("model_kind", "model_hparams"):
        if saved.get(key) != meta.get(key):
            raise RunDirError(
                f"cannot resume {run.root}: {key} differs (saved {saved.get(key)!r}, now "
                f"{meta.get(key)!r}). Use a new --run-dir; nothing was overwritten.")
    if saved.get("world_size") != meta.get("world_size") and not allow_world_size_change:
        raise RunDirError(
            f"cannot resume {run.root}: its checkpoints were written by {saved.get('world_size')} "
            f"worker(s) but this run has {meta.get('world_size')}. The effective batch and the "
            "learning-rate scaling would change; pass --allow-world-size-change to resume anyway.")
    return run.has_checkpoint()


def _vocab_mode(source_fingerprint: Optional[str]) -> str:
    return ("one vocabulary shared by source and target" if source_fingerprint is None
            else f"a separate source vocabulary {source_fingerprint}")


def run_meta(cfg: Config, tokenizer: Tokenizers, world_size: int,
             languages: Sequence[str] = BUILTIN_LANGUAGES) -> Dict[str, Any]:
    """What ``meta.json`` records, and what :func:`check_resume` compares (``languages``:
    (source, target) of the data dir, :attr:`tf_nmt.data.prepared.PreparedData.languages`;
    ``tokenizer``: the shared one, or the :class:`TokenizerPair` of separate ones, whose
    ``vocab_*`` keys are the target's and ``source_vocab_*`` the source's, null when shared)."""
    vocab = TokenizerPair.of(tokenizer)
    return {"vocab_fingerprint": vocab.target.fingerprint, "vocab_size": vocab.target.vocab_size,
            "source_vocab_fingerprint": vocab.source_fingerprint,
            "source_vocab_size": vocab.source_vocab_size,
            "model_kind": cfg.model.kind, "model_hparams": cfg.model.hparams,
            "world_size": world_size, "languages": list(languages), "keras": KERAS_VERSION}


def check_keras(run: RunDir, meta: Optional[Mapping[str, Any]] = None) -> None:
    """RunDirError unless this process's Keras (``TF_NMT_KERAS``) is the one ``run`` was
    trained with: the two versions name some variables differently in checkpoints (Keras 3's
    ``Dense`` keeps ``_kernel``), so a checkpoint restores only into its own version's model."""
    saved = tf_nmt.recorded_keras(run.read_meta() if meta is None else meta)
    if saved != KERAS_VERSION:
        raise RunDirError(f"{run.root} was trained with Keras {saved} but this process uses Keras "
                          f"{KERAS_VERSION}: set {ENV_VAR}={saved} (or pass --keras {saved}) to "
                          "resume, evaluate, average, export or transfer from it, or convert it "
                          f"once with tf-nmt convert-keras --run-dir {run.root} --output-dir NEW")


def save_vocabularies(run: RunDir, tokenizer: Tokenizers) -> None:
    """Write the run's vocabulary files the first time (``source_vocab.model`` only when
    separate); existing files are kept (:func:`check_resume` compared them already)."""
    vocab = TokenizerPair.of(tokenizer)
    if not run.vocab_path.is_file():
        vocab.target.save(run.vocab_path)
    if not vocab.shared and not run.source_vocab_path.is_file():
        vocab.source.save(run.source_vocab_path)


def languages_of(meta: Optional[Mapping[str, Any]]) -> Tuple[str, str]:
    """(source, target) a run's meta records; en-de for runs from before it was recorded."""
    src, tgt = (meta or {}).get("languages") or BUILTIN_LANGUAGES
    return str(src), str(tgt)


def build_initialised_model(kind: str, vocab_size: int, hparams: Mapping[str, Any],
                            policy: str = "float32",
                            activation_quantization: Optional[ActivationQuantization] = None,
                            source_vocab_size: Optional[int] = None) -> keras.Model:
    """A new model of ``kind`` with its variables created (called once on dummy inputs);
    ``source_vocab_size``: separate vocabularies (None: shared).

    ``activation_quantization`` (from ``train.quantize_activations_*``, see
    :func:`tf_nmt.models.activation_quant.from_train_config`) log-quantises its matmul inputs.

    ``policy`` is the Keras dtype policy ("float32" or "mixed_bfloat16"). It is set only while
    the layers are constructed and called (layers keep the policy they were built with), so the
    rest of the process, e.g. evaluation and export, stays in float32.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = build_model(kind, vocab_size, activation_quantization,
                            source_vocab_size=source_vocab_size, **dict(hparams))
        model({"source": tf.ones([1, 4], tf.int32), "target_in": tf.ones([1, 4], tf.int32)})
    finally:
        keras.mixed_precision.set_global_policy(previous)
    return model


def resolve_checkpoint(run: RunDir, checkpoint: Optional[str] = None) -> str:
    """The checkpoint prefix ``checkpoint`` names: a prefix, a directory of checkpoints (its
    latest, e.g. the output of ``average-checkpoints``), or None for the run's latest."""
    prefix = checkpoint or run.latest_checkpoint()
    if prefix is None:
        raise RunDirError(f"no checkpoint in {run.checkpoints}")
    if Path(prefix).is_dir():
        latest = tf.train.latest_checkpoint(str(prefix))
        if latest is None:
            raise RunDirError(f"no checkpoint in the directory {prefix}")
        prefix = latest
    if not Path(f"{prefix}.index").is_file():
        raise RunDirError(f"checkpoint {prefix} not found (no {prefix}.index)")
    return str(prefix)


def default_weights(has_ema: bool) -> str:
    """The one rule for which weights a command uses when none are asked for: ``"ema"`` where
    the checkpoint (every checkpoint, for an average) holds a weight EMA (a run trained with
    ``train.ema_decay`` > 0, as the quickstart Transformer is), else ``"raw"``. The CLI, the
    quickstart and every library function below share it."""
    return "ema" if has_ema else "raw"


def choose_weights(run_dir: Path, checkpoint: Optional[str] = None,
                   weights: Optional[str] = None) -> Tuple[Optional[str], str]:
    """(checkpoint, weights) for a command that loads a run: ``weights`` as given, or, given
    none, :func:`default_weights` for the checkpoint. When it decides, the checkpoint comes
    back resolved (see :func:`resolve_checkpoint`), so the weights named are those of the
    checkpoint loaded even while training writes newer ones; a missing run or checkpoint is
    left to the loader to report."""
    if weights is not None:
        return checkpoint, weights
    try:
        prefix = resolve_checkpoint(RunDir(Path(run_dir)), checkpoint)
        return prefix, default_weights(checkpoint_has_ema(prefix))
    except (RunDirError, tf.errors.OpError):  # no checkpoint, or an unreadable one
        return checkpoint, "raw"


def checkpoints_weights(prefixes: Sequence[str], weights: Optional[str] = None) -> str:
    """``weights`` as given, else :func:`default_weights` over all of ``prefixes`` (an average
    uses the EMA only where every checkpoint holds one)."""
    if weights is not None:
        return weights
    return default_weights(bool(prefixes) and all(map(checkpoint_has_ema, prefixes)))


@dataclass
class LoadedRun:
    """A trained run's model restored from one checkpoint, with what was loaded."""

    model: keras.Model
    tokenizer: Tokenizers
    cfg: Config
    checkpoint: str  # the prefix restored (resolved once)
    weights: str     # "raw" or "ema"


def load_run(run_dir: Path, checkpoint: Optional[str] = None, weights: Optional[str] = None
             ) -> LoadedRun:
    """The float32 model, tokenizer and config of a run, restored from ``checkpoint`` (see
    :func:`resolve_checkpoint`); the tokenizer is the shared one, or the :class:`TokenizerPair`
    of a separate-vocabulary run (translation code takes either); the model quantises its
    matmul inputs as the run was trained to (``train.quantize_activations_*``). ``weights``:
    ``"raw"`` (the trained weights), ``"ema"`` (their moving average, ``train.ema_decay``;
    :mod:`tf_nmt.models.ema`) or None (:func:`choose_weights`: the EMA where the checkpoint
    holds one). The prefix is resolved once, so a caller that records it names what was loaded
    even while a training run goes on writing newer checkpoints."""
    if weights is not None and weights not in WEIGHTS:
        raise RunDirError(f"unknown weights {weights!r} (use one of {', '.join(WEIGHTS)})")
    run = RunDir(Path(run_dir))
    if not run.root.is_dir():
        raise RunDirError(f"{run.root} is not a tf-nmt run directory (it does not exist)")
    if not run.config_path.is_file():
        raise RunDirError(f"{run.root} is not a tf-nmt run directory (no config.yaml)")
    cfg = load_config(run.config_path)
    vocab = run.vocabularies()  # a half-written run dir is named so before any Keras mismatch
    check_keras(run)
    model = build_initialised_model(cfg.model.kind, vocab.target.vocab_size, cfg.model.hparams,
                                    activation_quantization=from_train_config(cfg.train),
                                    source_vocab_size=vocab.source_vocab_size)
    prefix = resolve_checkpoint(run, checkpoint)
    weights = checkpoints_weights([prefix], weights)
    try:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial() \
            .assert_existing_objects_matched()
    except (tf.errors.OpError, IndexError, AssertionError) as err:  # truncated, corrupt, foreign
        raise RunDirError(f"cannot restore checkpoint {prefix} into the {cfg.model.kind} model of "
                          f"{run.root}: {type(err).__name__}: {str(err).splitlines()[0][:200]}") from err
    if weights == "ema":
        restore_ema_weights(model, prefix)
    return LoadedRun(model, vocab.as_tokenizer(), cfg, prefix, weights)


def load_trained_model(run_dir: Path, checkpoint: Optional[str] = None,
                       weights: Optional[str] = None) -> Tuple[keras.Model, Tokenizers, Config]:
    """(model, tokenizer, config) of :func:`load_run`."""
    run = load_run(run_dir, checkpoint, weights)
    return run.model, run.tokenizer, run.cfg


def load_trained_checkpoint(run_dir: Path, checkpoint: Optional[str] = None,
                            weights: Optional[str] = None
                            ) -> Tuple[keras.Model, Tokenizers, Config, str]:
    """(model, tokenizer, config, checkpoint prefix restored) of :func:`load_run`."""
    run = load_run(run_dir, checkpoint, weights)
    return run.model, run.tokenizer, run.cfg, run.checkpoint


def check_data_matches(prepared: PreparedData, run: RunDir, tokenizer: Tokenizers,
                       advice: str) -> None:
    """DataError (ending in ``advice``, what to do instead) when ``prepared`` holds another
    language pair than the run was trained on, or (an own corpus) other vocabularies than the
    run's (``tokenizer``: the shared one, or the run's separate :class:`TokenizerPair`), or the
    other vocabulary mode (shared or separate): reading its ids with the run's vocabulary would
    read other pieces."""
    trained = run.languages()
    if prepared.languages != trained:
        raise DataError(f"{prepared.root} holds {'-'.join(prepared.languages)} but the run "
                        f"{run.root} was trained on {'-'.join(trained)}: {advice}")
    vocab = TokenizerPair.of(tokenizer)
    mode = {True: "one shared vocabulary", False: "separate vocabularies"}
    if prepared.own and prepared.shared_vocab != vocab.shared:
        raise DataError(f"{prepared.root} was prepared with {mode[prepared.shared_vocab]} but "
                        f"the run {run.root} uses {mode[vocab.shared]}: {advice}")
    for what, recorded, used in (
            ("vocabulary", prepared.vocab_fingerprint, vocab.target.fingerprint),
            ("source vocabulary", prepared.source_vocab_fingerprint, vocab.source_fingerprint)):
        if recorded and recorded != used:
            raise DataError(f"{prepared.root} was prepared with {what} {recorded} but the run "
                            f"{run.root} uses {used}: {advice}")
