"""Shared by the studies: the study config, real token batches of one rank, the ranks' JSON
files, result files that are never replaced by accident, and running ``tf-nmt`` commands."""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tf_nmt.config import Config, load_config, preset
from experiments.lib.launcher import CONTROLLERS
from tf_nmt.utils.io import write_json_atomic


ROOT = Path(__file__).resolve().parents[2]  # the checkout the experiments run from


def command_line(study: str, argv: Optional[Sequence[str]] = None) -> str:
    """The command that ran study ``study`` with ``argv`` (default: this process's arguments),
    as ``python -m experiments NAME ...``, for the results file."""
    return shlex.join(["python", "-m", "experiments", study,
                       *(sys.argv[1:] if argv is None else argv)])


def results_path(module_file: str, name: str) -> Path:
    """``<the study's folder>/results/<name>``: the default home of a study's results file."""
    return Path(module_file).resolve().parent / "results" / name


def git_revision() -> Dict[str, Any]:
    """The checkout's commit and whether it had uncommitted changes (None outside git)."""
    def git(*args: str) -> Optional[str]:
        try:
            return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                                  text=True, check=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_revision": git("rev-parse", "HEAD"),
            "git_dirty": None if status is None else code_changed(status)}


def code_changed(status: str) -> bool:
    """Whether ``git status --porcelain`` lists a change outside the results folders: a study
    that rewrites its own results file as it goes (``--resume``) does not make its code dirty."""
    paths = [line[3:].split(" -> ")[-1] for line in status.splitlines() if line.strip()]
    return any("/results/" not in f"/{path}" for path in paths)


def provenance(command: Optional[str] = None) -> Dict[str, Any]:
    """What every results file records: the command, git revision, date (UTC) and machine."""
    from datetime import datetime, timezone  # noqa: PLC0415

    from tf_nmt.utils import machine  # noqa: PLC0415

    return {"command": command or shlex.join(["python", "-m", "experiments", *sys.argv[1:]]),
            **git_revision(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine.describe()}


def study_config(preset_name: str, overrides: Sequence[str], batch_tokens: int) -> Config:
    """The preset with ``--set`` overrides and the study's token budget per batch and rank."""
    cfg = load_config(None, list(overrides), base=preset(preset_name))
    cfg.data.batch_tokens = int(batch_tokens)
    return cfg


def prepare_data(data_dir: Path, vocab_size: int) -> None:
    """Build the default corpus when ``data_dir`` has no train split, and learn its
    ``vocab_size``-piece vocabulary when missing, in this process.

    The ranks of a ``horovodrun`` launch refuse to learn a vocabulary each (they would race on
    the file), so a study prepares the data before it launches them, as ``prepare-data`` does.
    A corpus already there (the default one or a user's own) is used as it is."""
    from tf_nmt.data.builtin_corpus import prepare_corpus  # noqa: PLC0415 - only studies that launch ranks
    from tf_nmt.data.data_dir import corpus_dir, ensure_vocab  # noqa: PLC0415

    base = corpus_dir(Path(data_dir))
    if not all((base / f"train.{side}").is_file() for side in ("en", "de")):
        prepare_corpus(Path(data_dir))
    ensure_vocab(Path(data_dir), int(vocab_size))


def batch_tokens(features: Mapping[str, Any], labels: Any) -> Dict[str, int]:
    """Padded and real (non-pad) token counts of one batch."""
    src, tgt = np.asarray(features["source"]), np.asarray(labels)
    return {"sentences": int(src.shape[0]), "source_padded": int(src.size),
            "target_padded": int(tgt.size), "source_tokens": int(np.count_nonzero(src)),
            "target_tokens": int(np.count_nonzero(tgt))}


def rank_file(out_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` of a measurement writes its record."""
    return Path(out_dir) / f"rank{rank}.json"


def read_ranks(out_dir: Path, size: int) -> List[dict]:
    """The ranks' ``rank<r>.json`` files, in rank order (error when one is missing)."""
    found = []
    for rank in range(size):
        path = rank_file(out_dir, rank)
        if not path.is_file():
            raise RuntimeError(f"rank {rank} wrote no {path.name} in {out_dir}")
        found.append(json.loads(path.read_text()))
    return found


def refuse_existing(paths: Iterable[Path], overwrite: bool) -> None:
    """Stop (before any work) when an output exists and ``--overwrite`` was not given."""
    for path in paths:
        if Path(path).exists() and not overwrite:
            raise SystemExit(f"{path} exists: pass --overwrite to replace it")


def write_result(path: Path, payload: Mapping[str, Any], overwrite: bool) -> None:
    """Atomic JSON write of a results file, stamped with its :func:`provenance` (the payload's
    own ``command`` when it has one); refuses to replace one without ``overwrite``."""
    refuse_existing([path], overwrite)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stamp = provenance(payload.get("command") if isinstance(payload.get("command"), str) else None)
    write_json_atomic(Path(path), {**payload, "provenance": stamp})


def parse_ranks(text: str) -> Tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4)."""
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or min(values) < 1:
        raise ValueError(f"rank counts must be positive integers, got {text!r}")
    return values


def toy_data_dir(toy_data: Optional[Callable[[Path], Path]], work_dir: str, script: str) -> str:
    """The toy prepared-data directory a study's ``--tiny`` trains on, written under
    ``work_dir`` by ``toy_data`` (the test helpers' writer, which ``script`` passes in)."""
    if toy_data is None:
        raise SystemExit(f"--tiny needs the toy corpus of the test helpers: run "
                         f"{script} --tiny from a source checkout")
    return str(toy_data(Path(work_dir) / "toy-data"))


def set_args(overrides: Sequence[str]) -> List[str]:
    """``["a=1", "b=2"]`` -> ``["--set", "a=1", "--set", "b=2"]`` for a ``tf-nmt`` command."""
    return [item for value in overrides for item in ("--set", value)]


def tf_nmt_command() -> List[str]:
    """The command that runs ``tf-nmt`` with this interpreter (also from a source checkout)."""
    return [sys.executable, "-m", "tf_nmt"]


def experiments_script() -> Path:
    """The script that runs one study's rank under ``horovodrun`` (``python SCRIPT NAME ...``)."""
    return ROOT / "experiments" / "__main__.py"


def tf_nmt_executable() -> Path:
    """This environment's ``tf-nmt`` console script, for launchers that run ``python SCRIPT``."""
    path = Path(sys.executable).parent / "tf-nmt"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}: install tf-nmt into this environment "
                                "(scripts/setup.sh)")
    return path


def run_tf_nmt(*args: str) -> None:
    """Run ``tf-nmt ARGS`` in a subprocess, echoing the command; fail when it fails."""
    cmd = [*tf_nmt_command(), *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def add_rank_study_args(p: argparse.ArgumentParser, out: Path, ranks: str) -> None:
    """The options of a study that launches its own worker on every rank under horovodrun
    and feeds it real batches: :func:`add_launch_args` plus the batches' size and sample."""
    p.add_argument("--batch-tokens", type=int, default=5000)
    p.add_argument("--pairs-per-rank", type=int, default=3000,
                   help="train pairs each rank samples and tokenises")
    add_launch_args(p, out, ranks)


def add_launch_args(p: argparse.ArgumentParser, out: Path, ranks: str,
                    timeout: float = 900) -> None:
    """The options of a study that launches its own worker on every rank under horovodrun
    (rank counts, model, launcher, output; ``--worker``/``--worker-out`` are the ranks' own)."""
    p.add_argument("--ranks", default=ranks, help="rank counts to measure under horovodrun")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--controller", default="gloo", choices=CONTROLLERS)
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--timeout", type=float, default=timeout)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)


def worker_argv(study: str, args: argparse.Namespace, out_dir: str, *extra: str) -> List[str]:
    """The ``tf-nmt`` arguments that run one rank of ``study`` (see :func:`add_rank_study_args`)."""
    return [study, "--worker", "--worker-out", out_dir, "--preset", args.preset,
            "--batch-tokens", str(args.batch_tokens), "--steps", str(args.steps),
            "--pairs-per-rank", str(args.pairs_per_rank), *extra, *set_args(args.set)]


def run_rank_study(args: argparse.Namespace, worker: Callable[[argparse.Namespace], None],
                   measure: Callable[[argparse.Namespace], Dict[str, Any]],
                   table: Callable[[Dict[str, Any]], str],
                   figures: Mapping[Path, Callable[[Dict[str, Any], Path], None]]) -> int:
    """The main of a study with :func:`add_rank_study_args`: one rank's ``worker`` under
    ``--worker``; otherwise refuse existing outputs, prepare the data (:func:`prepare_data`),
    ``measure``, print the ``table``, write ``--out`` and draw each figure to its path."""
    if args.worker:
        worker(args)
        return 0
    refuse_existing([args.out, *figures], args.overwrite)
    data = study_config(args.preset, args.set, args.batch_tokens).data
    prepare_data(data.data_dir, data.vocab_size)
    result = measure(args)
    print("\n" + table(result))
    write_result(args.out, result, overwrite=args.overwrite)
    for path, draw in figures.items():
        draw(result, path)
    print("wrote " + ", ".join(str(p) for p in (args.out, *figures)))
    return 0


def add_work_dir_args(p: argparse.ArgumentParser, name: str, out: Path) -> None:
    """``--data-dir``, ``--work-dir runs/NAME``, ``--output OUT``, ``--overwrite``:
    the options of a study that trains runs through ``tf-nmt`` subprocesses."""
    p.add_argument("--data-dir", type=Path, default=Path("data_cache"))
    p.add_argument("--work-dir", type=Path, default=Path("runs") / name)
    p.add_argument("--output", type=Path, default=out)
    p.add_argument("--overwrite", action="store_true", help="replace --output and --work-dir")
