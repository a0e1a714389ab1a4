"""Chaos study: an elastic run that loses workers at random, a resume check and a list of bad
inputs, all through the real ``tf-nmt`` command line; writes ``experiments/chaos/results/reliability.json``.

* **kills** — ``horovodrun --min-np 2 --max-np W`` (Gloo) on W local host names (every failure
  blacklists its host, so each worker gets its own name); K times, at a random step and with all
  W workers up, one random worker is SIGKILLed. With a blacklist cool-down the host comes back,
  so the next attempt also takes a returning worker in. Per kill: the step it had reached, the
  committed step the survivors went on from and the steps lost (from ``RUN_DIR/elastic.jsonl``).
  A kill counts as survived only if every rank's state fingerprint agreed after every sync and
  at the end (``RUN_DIR/elastic_fingerprints``, :func:`rank_agreement`).
* **resume** — one process, trained to step S/2, stopped, resumed to S, against one trained
  straight to S: the largest weight difference and the final-loss difference.
* **bad inputs** — each must fail with a non-zero status and a one-line ``tf-nmt: error:``
  message (no traceback); the message is recorded.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import launcher
from experiments.lib import common
from horovod_patches import fingerprint as fingerprints
from tf_nmt.training.callbacks import read_progress_log
from tf_nmt.modes import ELASTIC_MODES

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
        "model.ff_dim=64", "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
        "train.peak_lr=0.003", "train.warmup_steps=10", "train.log_every=5", "train.seed=7"]
# A peer that stopped answering fails a collective after this long; it also bounds how long the
# survivors wait in the rendezvous for a returning worker to start (import TensorFlow, build).
GLOO_TIMEOUT_S = 60
# The comm modes `tf-nmt train --elastic` supports are tf_nmt.modes.ELASTIC_MODES (a module that
# loads no TensorFlow); GradDrop's extra settings.
MODE_OVERRIDES = {"graddrop": ["train.drop_ratio=0.9", "train.drop_warmup_steps=20"]}


def local_host_names() -> List[str]:
    """Names that resolve to an address of this machine (``localhost``, ``127.0.0.1``, the host
    name, its other IPv4 addresses): Horovod runs workers on them without ssh."""
    import psutil  # noqa: PLC0415 - Horovod's dependency, only needed here

    local = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family == socket.AF_INET}
    names: List[str] = []
    for name in ["localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn(), *sorted(local)]:
        try:
            resolved = socket.gethostbyname(name)
        except OSError:
            continue
        if resolved in local and name not in names:
            names.append(name)
    return names


def write_discovery(directory: Path, hosts: Sequence[str]) -> Path:
    """A host-discovery script printing ``directory/hosts`` (one ``host:1`` line per host; edit
    that file to add or remove hosts while the job runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts").write_text("".join(f"{h}:1\n" for h in hosts))
    script = directory / "discover_hosts.sh"
    script.write_text(f"#!/bin/sh\ncat '{directory / 'hosts'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def worker_pids(root_pid: int) -> List[int]:
    """The ``tf-nmt train`` worker processes below ``root_pid`` (not their shell wrappers)."""
    import psutil  # noqa: PLC0415

    pids = []
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for proc in children:
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if cmd and "python" in Path(cmd[0]).name and "tf_nmt" in cmd and "train" in cmd:
            pids.append(proc.pid)
    return pids


def last_step(run_dir: Path) -> int:
    """The last step ``progress.jsonl`` recorded (0 before the first entry)."""
    entries = read_progress_log(run_dir / "progress.jsonl")
    return int(entries[-1]["step"]) if entries else 0


def read_attempts(run_dir: Path) -> List[Dict[str, Any]]:
    """The attempts of an elastic run (``elastic.jsonl``; a torn last line is skipped)."""
    path = run_dir / "elastic.jsonl"
    entries = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return entries


# tf_nmt.training.elastic.FINGERPRINT_DIR (that module loads TensorFlow)
FINGERPRINT_DIR = "elastic_fingerprints"


def rank_agreement(run_dir: Path, finished: bool = True) -> Dict[str, Any]:
    """Whether the ranks of an elastic run held the same state after every sync and at the end:
    ``checks`` (the syncs and ends recorded) and ``problems``: each ``diverged`` one (its event,
    attempt, step and fingerprint -> ranks) and each ``missing`` one (a rank, an attempt of
    ``elastic.jsonl`` or, when ``finished``, the end with no fingerprint)."""
    entries = fingerprints.read_entries(run_dir / FINGERPRINT_DIR)
    problems = fingerprints.disagreements(entries)
    if not finished:  # a killed or failed job: ranks may die before they record
        problems = [p for p in problems if p["kind"] == "diverged"]
    else:
        recorded = {e.get("attempt") for e in entries if e["event"] == "sync"}
        problems += [{"kind": "missing", "event": "sync", "attempt": a["attempt"],
                      "step": a["step"], "world_size": a["world_size"]}
                     for a in read_attempts(run_dir) if a.get("attempt") not in recorded]
        if not any(e["event"] == "end" for e in entries):
            problems.append({"kind": "missing", "event": "end"})
    checks = {(e["event"], e.get("attempt"), e["step"], e["world_size"]) for e in entries}
    return {"checks": len(checks), "problems": problems}


def elastic_train_command(run_dir: Path, data_dir: Path, overrides: Sequence[str]) -> List[str]:
    """``tf-nmt train --elastic`` for one worker."""
    return [*common.tf_nmt_command(), "train", "--elastic", "--run-dir", str(run_dir),
            "--data-dir", str(data_dir), *common.set_args(overrides)]


def start_elastic(run_dir: Path, data_dir: Path, overrides: Sequence[str], hosts: Sequence[str],
                  work: Path, min_np: int = 2, cooldown: Optional[tuple] = None,
                  log_path: Optional[Path] = None,
                  gloo_timeout_s: int = GLOO_TIMEOUT_S,
                  elastic_timeout_s: Optional[int] = None,
                  env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Launch an elastic job of ``len(hosts)`` workers (one per host name) in its own session;
    ``elastic_timeout_s`` bounds the driver's wait for enough workers after a change; ``env``
    is added to the workers' environment."""
    script = write_discovery(work / "discovery", hosts)
    cmd = launcher.elastic_horovodrun_command(
        len(hosts), min_np, len(hosts), script,
        elastic_train_command(run_dir, data_dir, overrides), network_interface="lo",
        cooldown_seconds=cooldown, elastic_timeout_s=elastic_timeout_s)
    out = open(log_path or work / "elastic.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                            env=launcher.worker_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": str(gloo_timeout_s),
                                                     **(env or {})}))


def wait_for(predicate, proc: subprocess.Popen, timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail if ``proc`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise RuntimeError(f"the job exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    """Kill a launched job's whole session (used on failure)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def chaos_run(run_dir: Path, data_dir: Path, work: Path, kills: int, steps: int,
              commit_every: int, workers: int, seed: int, comm: str = "sparse_as_dense",
              timeout: float = 1200) -> Dict[str, Any]:
    """One elastic run of ``workers`` workers with ``kills`` random SIGKILLs; what happened."""
    hosts = local_host_names()[:workers]
    if len(hosts) < workers:
        raise RuntimeError(f"{workers} workers need {workers} local host names, found {hosts}")
    rng = random.Random(seed)
    overrides = TINY + [f"train.train_steps={steps}", f"train.steps_per_cycle={max(10, steps // 4)}",
                        f"train.elastic_commit_every={commit_every}", f"train.comm={comm}",
                        *MODE_OVERRIDES.get(comm, [])]
    proc = start_elastic(run_dir, data_dir, overrides, hosts, work, cooldown=(1, 2))
    window = (steps // 10, steps * 8 // 10)
    targets = sorted(rng.sample(range(*window), kills))
    done: List[Dict[str, Any]] = []
    try:
        for target in targets:
            def ready() -> bool:
                attempts = read_attempts(run_dir)
                return (last_step(run_dir) >= target and len(worker_pids(proc.pid)) == workers
                        and bool(attempts) and attempts[-1]["world_size"] == workers)
            wait_for(ready, proc, timeout, f"step {target} with {workers} workers")
            victim = rng.choice(worker_pids(proc.pid))
            seen = len(read_attempts(run_dir))
            step = last_step(run_dir)
            os.kill(victim, signal.SIGKILL)
            done.append({"target_step": target, "logged_step_at_kill": step, "pid": victim,
                         "time": time.time()})
            print(f"chaos: killed worker {victim} at logged step {step}", flush=True)
            wait_for(lambda: len(read_attempts(run_dir)) > seen, proc, timeout, "the reset")
        code = proc.wait(timeout=timeout)
    finally:
        stop(proc)
    attempts = read_attempts(run_dir)
    resets = attempts[1:]
    entries = read_progress_log(run_dir / "progress.jsonl")
    final = entries[-1]["step"] if entries else 0
    agreement = rank_agreement(run_dir, finished=code == 0)
    survived = code == 0 and final >= steps and not agreement["problems"]
    return {"workers": workers, "hosts": hosts, "comm": comm, "steps": steps,
            "commit_every": commit_every, "exit_code": code, "kills": done,
            "kills_survived": len(done) if survived else 0, "rank_agreement": agreement,
            "resets": resets, "steps_lost": [a["steps_lost"] for a in resets if a["failed_at"] is not None],
            "final_step": final,
            "first_loss": entries[0]["loss"] if entries else None,
            "final_loss": entries[-1]["loss"] if entries else None}


def _train(run_dir: Path, data_dir: Path, overrides: Sequence[str]) -> None:
    subprocess.run([*common.tf_nmt_command(), "train", "--run-dir", str(run_dir), "--data-dir",
                    str(data_dir), *common.set_args(overrides)], check=True, capture_output=True,
                   env=launcher.worker_env(threads=2))


def _weights(run_dir: Path) -> List[Any]:
    from tf_nmt.run_dir import load_trained_model  # noqa: PLC0415 - TensorFlow on demand

    model, _, _ = load_trained_model(run_dir)
    return model.get_weights()


def resume_check(work: Path, data_dir: Path, steps: int) -> Dict[str, Any]:
    """Interrupted at S/2 and resumed vs straight to S (one process): weight and loss deltas."""
    base = TINY + [f"train.steps_per_cycle={steps // 2}"]
    straight, resumed = work / "resume_straight", work / "resume_split"
    _train(straight, data_dir, base + [f"train.train_steps={steps}"])
    _train(resumed, data_dir, base + [f"train.train_steps={steps // 2}"])
    _train(resumed, data_dir, base + [f"train.train_steps={steps}"])
    a, b = _weights(straight), _weights(resumed)
    delta = max(float(abs(x - y).max()) for x, y in zip(a, b))
    la = read_progress_log(straight / "progress.jsonl")[-1]["loss"]
    lb = read_progress_log(resumed / "progress.jsonl")[-1]["loss"]
    return {"steps": steps, "interrupted_at": steps // 2, "max_abs_weight_delta": delta,
            "final_loss_straight": la, "final_loss_resumed": lb, "final_loss_delta": abs(la - lb)}


def bad_inputs(work: Path, data_dir: Path, trained_run: Path) -> List[Dict[str, Any]]:
    """Bad configs, missing directories and corrupt files through the real CLI: each must fail
    with one ``tf-nmt: error:`` line."""
    corrupt = work / "corrupt_run"
    shutil.rmtree(corrupt, ignore_errors=True)
    shutil.copytree(trained_run, corrupt)
    for data in corrupt.glob("checkpoints/*.data-*"):
        data.write_bytes(data.read_bytes()[: len(data.read_bytes()) // 3])
    packed = work / "corrupt.packed"
    packed.write_bytes(b"TFNMT\x00 not a packed model")
    missing = work / "does_not_exist"
    cases = {
        "unknown config key": ["train", "--run-dir", str(work / "r1"), "--data-dir", str(data_dir),
                               "--set", "train.no_such_key=1"],
        "bad config value": ["train", "--run-dir", str(work / "r2"), "--data-dir", str(data_dir),
                             "--set", "train.comm=carrier_pigeon"],
        "missing data dir": ["train", "--run-dir", str(work / "r3"), "--data-dir", str(missing)],
        "--elastic without an elastic launch": ["train", "--elastic", "--run-dir",
                                                str(work / "r4"), "--data-dir", str(data_dir)],
        "--elastic with bmuf": ["train", "--elastic", "--run-dir", str(work / "r5"),
                                "--data-dir", str(data_dir), "--set", "train.comm=bmuf"],
        "translate: missing run dir": ["translate", "--run-dir", str(missing), "--input",
                                       str(data_dir / "corpus" / "dev.en")],
        "translate: missing export dir": ["translate", "--export-dir", str(missing), "--input",
                                          str(data_dir / "corpus" / "dev.en")],
        "evaluate: corrupt checkpoint": ["evaluate", "--run-dir", str(corrupt), "--limit", "2"],
        "export: corrupt packed file": ["export", "--quantized", str(packed), "--export-dir",
                                        str(work / "e1")],
    }
    results = []
    for name, args in cases.items():
        proc = subprocess.run([*common.tf_nmt_command(), *args], capture_output=True, text=True,
                              env=launcher.worker_env(threads=2), timeout=600)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        message = next((line for line in lines if line.startswith("tf-nmt: error:")), None)
        results.append({"input": name, "command": ["tf-nmt", *args], "exit_code": proc.returncode,
                        "message": message or (lines[-1] if lines else ""),
                        "one_line_error": message is not None and "Traceback" not in proc.stderr})
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments chaos", description=__doc__.split("\n\n")[0])
    common.add_work_dir_args(p, "chaos", common.results_path(__file__, "reliability.json"))
    p.add_argument("--kills", type=int, default=3, help="random worker kills in the elastic run")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=3000, help="elastic run length in steps")
    p.add_argument("--commit-every", type=int, default=20, help="train.elastic_commit_every")
    p.add_argument("--comm", default="sparse_as_dense", choices=ELASTIC_MODES)
    p.add_argument("--resume-steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    common.refuse_existing([args.output], args.overwrite)
    if args.work_dir.exists():
        if not args.overwrite:
            raise SystemExit(f"{args.work_dir} exists: pass --overwrite to replace it")
        shutil.rmtree(args.work_dir)
    args.work_dir.mkdir(parents=True)
    from tf_nmt.data.data_dir import ensure_vocab  # noqa: PLC0415 - one process learns it

    ensure_vocab(args.data_dir, 320)
    start = time.time()
    run_dir = args.work_dir / "elastic_run"
    chaos = chaos_run(run_dir, args.data_dir, args.work_dir, args.kills, args.steps,
                      args.commit_every, args.workers, args.seed, args.comm)
    resume = resume_check(args.work_dir, args.data_dir, args.resume_steps)
    bad = bad_inputs(args.work_dir, args.data_dir, args.work_dir / "resume_straight")
    payload = {"command": common.command_line("chaos", argv),
               "elastic": chaos, "resume": resume, "bad_inputs": bad,
               "wall_seconds": time.time() - start, "python": sys.version.split()[0]}
    common.write_result(args.output, payload, overwrite=True)
    print(f"chaos: {chaos['kills_survived']}/{len(chaos['kills'])} kills survived (ranks agreed "
          f"at {chaos['rank_agreement']['checks']} syncs and ends, "
          f"{len(chaos['rank_agreement']['problems'])} problems), steps lost "
          f"{chaos['steps_lost']}, final step {chaos['final_step']}; resume max |dw| "
          f"{resume['max_abs_weight_delta']:.3g}; {sum(b['one_line_error'] for b in bad)}/"
          f"{len(bad)} bad inputs refused in one line -> {args.output}")
    ok = chaos["exit_code"] == 0 and chaos["kills_survived"] >= args.kills
    return 0 if ok and all(b["one_line_error"] and b["exit_code"] != 0 for b in bad) else 1
