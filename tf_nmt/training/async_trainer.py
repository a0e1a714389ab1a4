"""``tf-nmt train-async``: the configured NMT model trained with asynchronous SGD on a local
parameter-server cluster (:mod:`tf_nmt.distributed.async_sgd`), optionally with K-way global
accumulation, synchronous rounds, artificial staleness, or Downpour's local accumulation
(``n_push``), fetch period (``n_fetch``) and gradient clipping (``train.clip_norm``).

The run directory has the usual layout (config.yaml, vocab.model, meta.json, checkpoints/), so
``tf-nmt evaluate``/``export``/``translate`` work on it; ``async.json`` holds the staleness
report. Each worker reads the whole training set in its own random order (unseeded shuffles:
asynchronous training is not reproducible anyway). Fresh runs only (no resume). The
optimizer is Adam with the configured schedule, applied on the server.
"""
from __future__ import annotations

import gc
import math
from pathlib import Path
from typing import Any, Callable, Dict

from tf_nmt.compat import ENV_VAR, KERAS3, keras, tf
from tf_nmt.config import Config, ConfigError, TrainConfig
from tf_nmt.config_usage import USAGE, check_given
from tf_nmt.data.pipeline import check_data_config, encode_corpus, make_dataset
from tf_nmt.data.prepared import DataError, read_prepared
from tf_nmt.data.data_dir import ensure_vocab
from tf_nmt.data.weighting import load_train_pairs
from tf_nmt.distributed.async_sgd import train_async
from tf_nmt.distributed.downpour import requested as downpour_requested
from tf_nmt.distributed.ps_cluster import LocalPSCluster
from tf_nmt.models.kernels import use_kernels
from tf_nmt.models.losses import LabelSmoothedCrossEntropy
from tf_nmt.run_dir import RunDir, RunDirError, build_initialised_model, run_meta
from tf_nmt.training import runtime, schedules
from tf_nmt.training.checkpoints import make_manager
from tf_nmt.utils.io import write_json_atomic


def train_nmt_async(cfg: Config, run_dir: Path, workers: int, k: int = 1, synchronous: bool = False,
                    refresh_every: int = 0, n_push: int = 1, n_fetch: int = 1,
                    progress_every: float = 60.0,
                    log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Train ``cfg.train.train_steps`` *updates* (``k`` pushes each, a push being the mean of
    ``n_push`` worker gradients); returns the report. The server's counters are logged every
    ``progress_every`` seconds (0: only at the end)."""
    if KERAS3:
        raise ConfigError(f"tf-nmt train-async runs on Keras 2 only ({ENV_VAR}=2; the tf-nmt command picks it for train-async): "
                          "Keras 3 has no parameter-server training (docs/keras.md)")
    run = RunDir(Path(run_dir))
    if run.meta_path.exists() or run.has_checkpoint():
        raise RunDirError(f"{run.root} already holds a run; train-async starts fresh runs only")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if n_push < 1 or n_fetch < 1:
        raise ConfigError(f"--n-push and --n-fetch must be >= 1, got {n_push} and {n_fetch}")
    if progress_every < 0:
        raise ConfigError(f"--progress-every must be >= 0 seconds, got {progress_every}")
    downpour = downpour_requested(n_push, n_fetch, cfg.train.clip_norm)
    if downpour and (synchronous or refresh_every):
        raise ConfigError("--n-push, --n-fetch and train.clip_norm (Downpour) are asynchronous: "
                          "they exclude --synchronous and --refresh-every")
    t = cfg.train
    check_async_config(t)
    check_given(cfg, "train-async")  # what the user gave, default values too
    check_data_config(cfg.data)
    keras.utils.set_random_seed(t.seed)
    data_dir = Path(cfg.data.data_dir)
    if read_prepared(data_dir).own:
        raise DataError(f"train-async holds the built-in corpus in memory; {data_dir} is an own "
                        "corpus (corpus/manifest.json): train it with tf-nmt train, which streams "
                        "its shards")
    tokenizer = ensure_vocab(data_dir, cfg.data.vocab_size, log=log)
    corpus = encode_corpus(load_train_pairs(data_dir, cfg.data.oversample), tokenizer)
    loss_object = LabelSmoothedCrossEntropy(t.label_smoothing, kernel=t.loss_kernel)

    choices = runtime.resolve_kernels(t)  # (kernel, why auto fell back to tf) per kernel
    kernels = {name: kernel for name, (kernel, _why) in choices.items()}
    fallbacks = {name: why for name, (_kernel, why) in choices.items() if why}
    _policy, policy_record = runtime.choose_policy(t.mixed_precision)  # float32: refused else
    runtime.log_fallbacks(fallbacks, policy_record, log)
    started = runtime.runtime_record(t, kernels, fallbacks, policy_record, resuming=False)

    def build():
        with use_kernels(**kernels):
            return build_initialised_model(cfg.model.kind, tokenizer.vocab_size, cfg.model.hparams)

    def loss_fn(model, batch):
        inputs, labels = batch
        return loss_object(labels, model(inputs, training=True))

    sized = _SizedCorpus(corpus.source, corpus.target, len(corpus))

    def dataset_fn():  # traced on the workers: the corpus length must be a Python int
        return make_dataset(sized, cfg.data.batch_tokens, cfg.data.max_length, shuffle=True,
                            repeat=True, seed=None,
                            shuffle_buffer=cfg.data.shuffle_buffer,
                            bucket_width=cfg.data.length_bucket_width)

    def optimizer():
        # Each server update applies one push (or K summed pushes) of one worker's batch, so the
        # synchronous worker-scaling rule does not apply: the schedule is the one-process one.
        schedule = schedules.from_config(t, world_size=1)
        return keras.optimizers.Adam(schedule, beta_1=t.beta_1, beta_2=t.beta_2, epsilon=t.epsilon)

    pushes = t.train_steps * k
    log(f"{cfg.model.kind}: async SGD on {workers} worker(s) + 1 ps (127.0.0.1), k={k}, "
        f"{'synchronous rounds, ' if synchronous else ''}refresh_every={refresh_every}, "
        + (f"Downpour n_push={n_push} n_fetch={n_fetch} clip_norm={t.clip_norm}, "
           if downpour else "") + f"{t.train_steps} updates = {pushes} pushes")
    with LocalPSCluster(num_workers=workers) as cluster:
        out = train_async(cluster.strategy, cluster.coordinator, build, loss_fn, dataset_fn,
                          optimizer, pushes=pushes, k=k, refresh_every=refresh_every,
                          synchronous=synchronous, n_push=n_push, n_fetch=n_fetch,
                          clip_norm=t.clip_norm, num_workers=workers, log=log,
                          progress_every=progress_every)
        model = out["model"]
        run.root.mkdir(parents=True, exist_ok=True)
        tokenizer.save(run.vocab_path)
        cfg.save(run.config_path)
        run.write_meta(runtime.with_runtime(run_meta(cfg, tokenizer, workers), None, started))
        make_manager(tf.train.Checkpoint(model=model), run.checkpoints, 1).save(
            checkpoint_number=t.train_steps)
        report = dict(out["report"])
        # Free the model, the accumulator and their traced functions while the servers still run:
        # freed after close(), each one logs a gRPC error trying to reach a server that is gone.
        del out, model
        gc.collect()
    report.update(workers=workers, model_kind=cfg.model.kind, peak_lr=t.peak_lr)
    losses = report["losses"]
    tail = losses[-max(1, len(losses) // 10):]
    report["final_loss"] = sum(tail) / len(tail)
    report["diverged"] = not math.isfinite(report["final_loss"])
    write_json_atomic(run.root / "async.json", report)
    log(f"{report['updates']} updates from {report['pushes']} pushes in {report['seconds']:.1f} s; "
        f"staleness mean {report['mean']:.2f}, max {report['max']}; final loss {report['final_loss']:.4f}")
    return report


def check_async_config(t: TrainConfig) -> None:
    """Refuse every train.* setting that async training would otherwise silently ignore, when it
    differs from its default (:func:`tf_nmt.config_usage.check_given` refuses them when given at
    all): the keys :data:`tf_nmt.config_usage.USAGE` does not mark as used by train-async."""
    defaults = TrainConfig()
    unsupported = {dotted.split(".", 1)[1]: usage.off for dotted, usage in USAGE.items()
                   if dotted.startswith("train.") and "train-async" not in usage.modes}
    for key, why in unsupported.items():
        if getattr(t, key) != getattr(defaults, key):
            raise ConfigError(f"train.{key}={getattr(t, key)!r} is not supported by train-async "
                              f"({why}); leave it at its default {getattr(defaults, key)!r}")


class _SizedCorpus:
    """An encoded corpus whose length is known without running a TensorFlow op."""

    def __init__(self, source: tf.RaggedTensor, target: tf.RaggedTensor, size: int) -> None:
        self.source, self.target, self._size = source, target, int(size)

    def __len__(self) -> int:
        return self._size
