"""``tf-nmt train`` and ``tf-nmt train-async``: a run's configuration from a preset, a config
file, ``--set`` items and flags, then the trainer."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from tf_nmt.config import Config, config_from_dict, load_config, preset


def build_config(preset_name: Optional[str] = None, config_file: Optional[Path] = None,
                 sets: Sequence[str] = (), data_dir: Optional[Path] = None,
                 keys: Optional[Mapping[str, Any]] = None) -> Config:
    """The configuration of a run: ``preset_name`` (or the defaults), then ``config_file``, then
    the ``sets`` (``section.key=value``), then ``data_dir``, then ``keys`` (dotted key -> value,
    what a command's own flags set; None values are not given). Everything but the preset counts
    as given (``Config.given``), so a key the run would ignore is refused."""
    base = preset(preset_name) if preset_name else Config()
    cfg = load_config(config_file, list(sets), base=base)
    if data_dir:
        cfg.data.data_dir = str(data_dir)
    for dotted, value in (keys or {}).items():
        if value is None:
            continue
        section, key = dotted.split(".", 1)  # checked and coerced as --set would be
        cfg = config_from_dict({section: {key: value}}, cfg, from_file=False, origin="flag")
    return cfg


def train(cfg: Config, run_dir: Path, elastic: bool = False,
          allow_world_size_change: bool = False):
    """Train or resume the run in ``run_dir`` with ``model.fit`` (one process or every rank of a
    horovodrun); ``elastic``: Horovod elastic training (survive lost workers, take returning ones
    back). Returns the trainer's result (``final_step``, ``wall_seconds``, ``history``...)."""
    if elastic:
        if allow_world_size_change:
            from tf_nmt.errors import UsageError

            raise UsageError("--allow-world-size-change would be ignored with --elastic (elastic "
                             "training changes the world size itself)")
        from tf_nmt.training.elastic import train_elastic

        result = train_elastic(cfg, Path(run_dir))
    else:
        from tf_nmt.training.trainer import train as train_run

        result = train_run(cfg, Path(run_dir), allow_world_size_change=allow_world_size_change)
    print(f"trained to step {result.final_step} in {result.wall_seconds / 60:.1f} min")
    return result


def train_async(cfg: Config, run_dir: Path, workers: int = 2, k: int = 1,
                synchronous: bool = False, refresh_every: int = 0, n_push: int = 1,
                n_fetch: int = 1, progress_every: float = 60.0):
    """Asynchronous SGD on a local parameter-server cluster (``workers`` worker processes and one
    server; see :func:`tf_nmt.training.async_trainer.train_nmt_async` for the knobs)."""
    from tf_nmt.training.async_trainer import train_nmt_async

    return train_nmt_async(cfg, Path(run_dir), workers=workers, k=k, synchronous=synchronous,
                           refresh_every=refresh_every, n_push=n_push, n_fetch=n_fetch,
                           progress_every=progress_every)
