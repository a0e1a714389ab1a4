"""Chaos stress: the elastic kill-a-worker case repeated N times in each communication mode that
``tf-nmt train --elastic`` supports; writes ``experiments/chaos/results/stress.json``.

Each attempt is one elastic job through the real ``tf-nmt`` command line and ``horovodrun``
(Gloo, W local host names, ``--min-np 2``), the chaos study's pieces: at a random step with all W
workers up one random worker (rank 0 included) is SIGKILLed and its host stays lost, so the job
must finish with W - 1. Per attempt the outcome is recorded:

* **survived** — the job exited 0 at its last step, and every rank's state fingerprint (weights
  and optimizer variables, ``RUN_DIR/elastic_fingerprints``) agreed after every sync (each
  recovery) and at the end;
* **diverged** — at some sync or at the end the ranks' fingerprints differed (the step, attempt
  and ranks of each are recorded), whatever the exit;
* **hung** — the attempt's time limit (``--attempt-timeout``) passed with the job still running
  (it is then killed: a hang is recorded, never waited on);
* **failed** — anything else (a non-zero exit, an exit short of the last step, a finished job
  with a rank's fingerprint missing).

with its time, final step, the step it was killed at, the victim's rank, the world sizes, the
steps lost and the number of rank-agreement checks. The results file is rewritten after every attempt; ``--resume`` skips the attempts it
already holds, so an interrupted stress run goes on where it stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from experiments.chaos import study as chaos
from experiments.lib import common
from tf_nmt.training.callbacks import read_progress_log

ELASTIC_MODES = chaos.ELASTIC_MODES
REFUSED_MODES = ("fedavg", "bmuf")
OUTCOMES = ("survived", "diverged", "hung", "failed")
# The lost host stays lost and nobody joins: a short Gloo timeout is enough, and a bounded
# elastic timeout makes a job left below --min-np fail instead of waiting 600 s.
GLOO_TIMEOUT_S, ELASTIC_TIMEOUT_S = 10, 60
# Mode "keras3": sparse_as_dense with tf-nmt's models on Keras 3 (TF_NMT_KERAS=3, the state in
# horovod_patches.keras3.elastic); not in the default --modes, which are Keras 2's.
KERAS3_MODE, KERAS3_COMM = "keras3", "sparse_as_dense"
SETTINGS = ("steps", "commit_every", "workers", "seed")  # must match to --resume


def parse_modes(text: str) -> List[str]:
    """``"a,b"`` -> ``["a", "b"]``, each one --elastic supports."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for mode in modes:
        if mode in REFUSED_MODES:
            raise SystemExit(f"--modes: {mode} cannot run elastically (its periodic-average state "
                             f"is not committed); use {', '.join(ELASTIC_MODES)}")
        if mode not in ELASTIC_MODES and mode != KERAS3_MODE:
            raise SystemExit(f"--modes: unknown mode {mode!r}; use "
                             f"{', '.join(ELASTIC_MODES + (KERAS3_MODE,))}")
    if not modes or len(set(modes)) != len(modes):
        raise SystemExit(f"--modes: give each of {', '.join(ELASTIC_MODES)} at most once")
    return modes


def pending(modes: Sequence[str], repeats: int, done: Sequence[Dict[str, Any]]) -> List[Tuple[str, int]]:
    """The (mode, repeat) attempts still to run, round by round (every mode once per round, so an interrupted run covers all modes), without those in ``done``."""
    have = {(a["mode"], int(a["repeat"])) for a in done}
    return [(m, i) for i in range(repeats) for m in modes if (m, i) not in have]


def summarise(attempts: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per mode: how many attempts ended in each outcome, and their mean time."""
    summary: Dict[str, Dict[str, Any]] = {}
    for a in attempts:
        row = summary.setdefault(a["mode"], {"attempts": 0, **{o: 0 for o in OUTCOMES},
                                             "seconds": 0.0})
        row["attempts"] += 1
        row[a["outcome"]] += 1
        row["seconds"] += a["seconds"]
    for row in summary.values():
        row["mean_seconds"] = round(row.pop("seconds") / row["attempts"], 1)
    return summary


def judge(code: Optional[int], final: int, steps: int,
          agreement: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """The outcome of a job that ended (``code``) at step ``final`` of ``steps`` with the rank
    agreement of :func:`experiments.chaos.study.rank_agreement`, and why it is not survived:
    ``diverged`` whenever the ranks' fingerprints differed, ``failed`` for a bad exit or a
    finished job whose fingerprints are incomplete."""
    problems = agreement["problems"]
    diverged = [p for p in problems if p["kind"] == "diverged"]
    if diverged:
        return "diverged", "; ".join(
            f"ranks differ at the {p['event']} of attempt {p['attempt']} (step {p['step']}, "
            f"{p['world_size']} workers): " + " vs ".join(
                "/".join(map(str, ranks)) for ranks in p["ranks"].values()) for p in diverged)
    if code != 0 or final < steps:
        return "failed", f"exit code {code} at step {final} of {steps}"
    if problems:
        return "failed", "no fingerprint from " + "; ".join(
            f"rank(s) {p.get('missing_ranks', 'all')} at the {p['event']} of attempt "
            f"{p.get('attempt')}" for p in problems)
    return "survived", None


def mode_overrides(mode: str, steps: int, commit_every: int) -> List[str]:
    mode = KERAS3_COMM if mode == KERAS3_MODE else mode
    overrides = chaos.TINY + [f"train.train_steps={steps}",
                              f"train.steps_per_cycle={max(10, steps // 4)}",
                              f"train.elastic_commit_every={commit_every}", f"train.comm={mode}"]
    return overrides + chaos.MODE_OVERRIDES.get(mode, [])


def _rank(pid: int) -> Optional[int]:
    import psutil  # noqa: PLC0415 - Horovod's dependency

    try:
        rank = psutil.Process(pid).environ().get("HOROVOD_RANK")
    except psutil.Error:
        return None
    return int(rank) if rank is not None and rank.isdigit() else None


def mode_env(mode: str) -> Dict[str, str]:
    """The job's environment beyond the default: the Keras version of ``mode``."""
    return {"TF_NMT_KERAS": "3" if mode == KERAS3_MODE else "2"}


def _log_tail(path: Path, lines: int = 6) -> str:
    text = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return "\n".join(text[-lines:])


def run_once(mode: str, repeat: int, work: Path, data_dir: Path, hosts: Sequence[str],
             steps: int, commit_every: int, timeout: float, seed: int) -> Dict[str, Any]:
    """One elastic job with one random SIGKILL; its outcome within ``timeout`` seconds."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run_dir, log = work / "run", work / "elastic.log"
    rng = random.Random(f"{seed}/{mode}/{repeat}")
    kill_at = rng.randrange(max(1, steps // 5), max(2, steps * 3 // 5))
    workers = len(hosts)
    start = time.monotonic()
    deadline = start + timeout
    record: Dict[str, Any] = {"mode": mode, "repeat": repeat, "kill_target_step": kill_at,
                              "work_dir": str(work)}
    proc = chaos.start_elastic(run_dir, data_dir, mode_overrides(mode, steps, commit_every),
                               hosts, work, gloo_timeout_s=GLOO_TIMEOUT_S,
                               elastic_timeout_s=ELASTIC_TIMEOUT_S, log_path=log,
                               env=mode_env(mode))
    phase, code = "before the kill", None
    try:
        def ready() -> bool:
            attempts = chaos.read_attempts(run_dir)
            return (chaos.last_step(run_dir) >= kill_at and bool(attempts)
                    and attempts[-1]["world_size"] == workers
                    and len(chaos.worker_pids(proc.pid)) == workers)
        chaos.wait_for(ready, proc, max(0.0, deadline - time.monotonic()),
                       f"step {kill_at} with {workers} workers")
        victim = rng.choice(chaos.worker_pids(proc.pid))
        record.update(victim_rank=_rank(victim), logged_step_at_kill=chaos.last_step(run_dir))
        os.kill(victim, signal.SIGKILL)
        phase = "after the kill"
        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except (TimeoutError, subprocess.TimeoutExpired):
        outcome = "hung"
        record["error"] = f"still running after {timeout:.0f} s ({phase})"
    except RuntimeError as e:  # the job exited while waiting for the kill's moment
        outcome, code = "failed", proc.returncode
        record["error"] = str(e)
    finally:
        chaos.stop(proc)
    entries = read_progress_log(run_dir / "progress.jsonl")
    final = int(entries[-1]["step"]) if entries else 0
    attempts = chaos.read_attempts(run_dir)
    ended = code is not None and "error" not in record  # exited by itself after the kill
    agreement = chaos.rank_agreement(run_dir, finished=ended and code == 0)
    if ended or any(p["kind"] == "diverged" for p in agreement["problems"]):
        outcome, error = judge(code, final, steps, agreement)
        if error:  # a hang or early exit that also diverged keeps both reasons
            record["error"] = error if ended else f"{error}; {record['error']}"
    record.update(rank_checks=agreement["checks"], rank_problems=agreement["problems"])
    record.update(outcome=outcome, seconds=round(time.monotonic() - start, 1), exit_code=code,
                  final_step=final, world_sizes=[a["world_size"] for a in attempts],
                  steps_lost=[a["steps_lost"] for a in attempts[1:] if a["failed_at"] is not None])
    if outcome != "survived":
        record["log_tail"] = _log_tail(log)
    return record


def prepare_data(args: argparse.Namespace, toy_data: Optional[Callable[[Path], Path]]) -> Path:
    """The data directory (the toy corpus with ``--tiny``), its vocabulary learnt once here
    (the workers refuse to learn it concurrently)."""
    data_dir = (Path(common.toy_data_dir(toy_data, str(args.work_dir), "python -m experiments "
                                         "chaos-stress")) if args.tiny else args.data_dir)
    from tf_nmt.data.data_dir import ensure_vocab  # noqa: PLC0415 - TensorFlow on demand

    ensure_vocab(data_dir, 320)
    return data_dir


def main(argv: Optional[Sequence[str]] = None,
         toy_data: Optional[Callable[[Path], Path]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments chaos-stress",
                                description=__doc__.split("\n\n")[0])
    common.add_work_dir_args(p, "chaos-stress", common.results_path(__file__, "stress.json"))
    p.add_argument("--tiny", action="store_true", help="train on the test suite's toy corpus")
    p.add_argument("--repeats", type=int, default=20, help="kill-a-worker attempts per mode")
    p.add_argument("--modes", default=",".join(ELASTIC_MODES),
                   help=f"comma-separated comm modes (of {', '.join(ELASTIC_MODES)}; "
                        f"{KERAS3_MODE}: {KERAS3_COMM} on Keras 3)")
    p.add_argument("--workers", type=int, default=3, help="workers at the start (>= 3)")
    p.add_argument("--steps", type=int, default=160, help="steps per job")
    p.add_argument("--commit-every", type=int, default=10, help="train.elastic_commit_every")
    p.add_argument("--attempt-timeout", type=float, default=900,
                   help="seconds an attempt may take before it is recorded as hung and killed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true",
                   help="keep --output's attempts and --work-dir, run only the missing attempts")
    args = p.parse_args(argv)
    modes = parse_modes(args.modes)
    if args.repeats < 1 or args.workers < 3:
        raise SystemExit("--repeats must be >= 1 and --workers >= 3 (one lost, --min-np 2)")
    settings = {k: getattr(args, k) for k in SETTINGS}
    done: List[Dict[str, Any]] = []
    if args.resume and args.output.exists():
        previous = json.loads(args.output.read_text())
        if previous.get("settings") != settings:
            raise SystemExit(f"--resume: {args.output} was made with {previous.get('settings')}, "
                             f"not {settings}")
        done = [a for a in previous.get("attempts", []) if a.get("mode") in modes]
        if any("rank_checks" not in a for a in done):
            raise SystemExit(f"--resume: {args.output} holds attempts from before the ranks' "
                             "fingerprints were checked; start afresh with --overwrite")
    elif not args.resume:
        common.refuse_existing([args.output], args.overwrite)
        if args.work_dir.exists():
            if not args.overwrite:
                raise SystemExit(f"{args.work_dir} exists: pass --overwrite to replace it")
            shutil.rmtree(args.work_dir)
    todo = pending(modes, args.repeats, done)
    hosts = chaos.local_host_names()[:args.workers]
    if len(hosts) < args.workers:
        raise SystemExit(f"{args.workers} workers need {args.workers} local host names, found {hosts}")
    data_dir = prepare_data(args, toy_data) if todo else args.data_dir
    attempts = list(done)
    print(f"chaos-stress: {len(todo)} attempts to run ({len(done)} already done)", flush=True)
    for mode, repeat in todo:
        record = run_once(mode, repeat, args.work_dir / mode / f"{repeat:03d}", data_dir, hosts,
                          args.steps, args.commit_every, args.attempt_timeout, args.seed)
        attempts.append(record)
        print(f"chaos-stress: {mode} #{repeat}: {record['outcome']} in {record['seconds']} s, "
              f"final step {record['final_step']}"
              + (f" ({record['error']})" if "error" in record else ""), flush=True)
        attempts.sort(key=lambda a: (modes.index(a["mode"]), a["repeat"]))
        common.write_result(args.output, {
            "command": common.command_line("chaos-stress", argv), "settings": settings,
            "modes": modes, "repeats": args.repeats, "hosts": hosts,
            "attempt_timeout_s": args.attempt_timeout, "attempts": attempts,
            "summary": summarise(attempts)}, overwrite=True)
    summary = summarise(attempts)
    for mode, row in summary.items():
        print(f"chaos-stress: {mode}: {row['survived']}/{row['attempts']} survived, "
              f"{row['diverged']} diverged, {row['hung']} hung, {row['failed']} failed "
              f"(mean {row['mean_seconds']} s)")
    return 0 if all(row["survived"] == row["attempts"] for row in summary.values()) else 1
