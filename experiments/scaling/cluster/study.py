"""Weak/strong scaling sweeps: run the step benchmark (:mod:`experiments.scaling.cluster.worker`) for each
link x comm mode x scaling kind x worker count, on this machine, on an emulated cluster, or on a
real cluster, and write the results JSON, Markdown tables and plots.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from experiments.lib.launcher import LaunchError, horovodrun_command, mpirun_command, worker_env
from experiments.scaling.cluster.efficiency import SCALING_KINDS, efficiency_rows, markdown_table, strong_split
from experiments.scaling.cluster.emulated_ranks import launch_emulated
from experiments.scaling.cluster.modes import mode_overrides
from experiments.scaling.cluster.netns import HOST_IFACE, EmulatedCluster, LinkSpec

LAUNCHERS = ("local", "emulated", "cluster")


@dataclass
class StudySpec:
    """What to sweep and how to launch it."""

    workers: List[int] = field(default_factory=lambda: [1, 2])
    kinds: List[str] = field(default_factory=lambda: ["weak", "strong"])
    comms: List[str] = field(default_factory=lambda: ["dense", "sparse_as_dense"])
    launcher: str = "local"
    links: List[str] = field(default_factory=lambda: ["1gbit"])  # emulated: tc rates
    delay: str = "0"
    hosts: Optional[str] = None         # cluster: "host1:4,host2:4"
    hostfile: Optional[str] = None      # cluster: "host slots=4" lines
    controller: str = "gloo"            # cluster: gloo (horovodrun) or mpi (mpirun)
    weak_sentences: int = 32            # per worker
    strong_sentences: int = 64          # global
    src_len: int = 24
    tgt_len: int = 24
    vocab_size: int = 8000
    preset: Optional[str] = None
    overrides: List[str] = field(default_factory=list)
    steps: int = 10
    warmup: int = 3
    block: int = 5
    exchange_steps: int = 0             # also time the exchange alone (worker --exchange-steps)
    threads: int = 1                    # intra-op threads per rank
    estimator: str = "min"              # min or median of the timed steps
    timeout: float = 900.0

    def validate(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher must be one of {LAUNCHERS}, got {self.launcher!r}")
        bad = [k for k in self.kinds if k not in SCALING_KINDS]
        if bad:
            raise ValueError(f"unknown scaling kind(s) {bad}: use weak and/or strong")
        if not self.workers or min(self.workers) < 1:
            raise ValueError(f"worker counts must be >= 1, got {self.workers}")
        if "strong" in self.kinds:
            for n in self.workers:
                strong_split(self.strong_sentences, n)
        if self.launcher == "cluster" and not (self.hosts or self.hostfile):
            raise ValueError("--launcher cluster needs --hosts or --hostfile")
        for comm in self.comms:
            mode_overrides(comm)

    def link_labels(self) -> List[str]:
        if self.launcher == "emulated":
            return [f"{rate}/{self.delay}" if self.delay not in ("0", "") else rate
                    for rate in self.links]
        return [self.launcher]


def worker_command(spec: StudySpec, comm: str, per_worker: int, out: Path) -> List[str]:
    """The ``python -m experiments.scaling.cluster.worker`` command line for one measurement (on an emulated
    cluster it counts the bytes each host sends during the distributed steps)."""
    cmd = [sys.executable, "-m", "experiments.scaling.cluster.worker", "--batch-sentences", str(per_worker),
           "--src-len", str(spec.src_len), "--tgt-len", str(spec.tgt_len),
           "--vocab-size", str(spec.vocab_size), "--steps", str(spec.steps),
           "--warmup", str(spec.warmup), "--block", str(spec.block),
           "--estimator", spec.estimator, "--out", str(out)]
    if spec.exchange_steps:
        cmd += ["--exchange-steps", str(spec.exchange_steps)]
    if spec.launcher == "emulated":
        cmd += ["--link-iface", HOST_IFACE]
    if spec.preset:
        cmd += ["--preset", spec.preset]
    for item in list(spec.overrides) + mode_overrides(comm):
        cmd += ["--set", item]
    return cmd


def launch_command(spec: StudySpec, n: int, command: Sequence[str]) -> List[str]:
    """How ``command`` is started as ``n`` ranks by the local or cluster launcher."""
    if spec.launcher == "local":
        return list(command) if n == 1 else horovodrun_command(n, command)
    if spec.controller == "mpi":
        return mpirun_command(n, command, hosts=spec.hosts, hostfile=spec.hostfile)
    return horovodrun_command(n, command, hosts=spec.hosts, hostfile=spec.hostfile)


def _measure(spec: StudySpec, link: str, n: int, command: List[str], out: Path,
             log_dir: Path) -> Dict[str, object]:
    extra: Dict[str, object] = {}
    if spec.launcher == "emulated":
        with EmulatedCluster(n, LinkSpec(link.split("/")[0], spec.delay), tag="study") as cluster:
            before = cluster.link_bytes()
            launch_emulated(cluster, command, log_dir, env=worker_env(threads=spec.threads),
                            timeout=spec.timeout)
            after = cluster.link_bytes()
            # the whole launch (rendezvous, broadcast, barriers, warm-up, all blocks), for the
            # record; bytes per step come from the worker's counts around its distributed steps
            extra["launch_link_bytes_sent"] = {h: after[h] - before[h] for h in after}
            extra["cluster"] = cluster.describe()
            rate_bits = cluster.link.rate_bits
    else:
        full = launch_command(spec, n, command)
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "launcher.log", "w") as fh:
            proc = subprocess.run(full, env=worker_env(threads=spec.threads), stdout=fh,
                                  stderr=subprocess.STDOUT, timeout=spec.timeout)
        if proc.returncode != 0:
            tail = (log_dir / "launcher.log").read_text(errors="replace")[-3000:]
            raise LaunchError(f"{' '.join(full[:6])} … exited with {proc.returncode}:\n{tail}")
        extra["command"] = full
    result = json.loads(out.read_text())
    result.update(extra)
    if spec.launcher == "emulated" and result.get("link_bytes_per_step") is not None:
        result["wire_s_at_link_rate"] = 8.0 * result["link_bytes_per_step"] / rate_bits
    return result


def run_study(spec: StudySpec, work_dir: Optional[Path] = None,
              log: Callable[[str], None] = print) -> Dict[str, object]:
    """Run every measurement of ``spec`` and return the study document (runs + rows)."""
    spec.validate()
    work = Path(work_dir or tempfile.mkdtemp(prefix="tfnmt-scaling-"))
    runs: List[Dict[str, object]] = []
    for link, label in zip(spec.links if spec.launcher == "emulated" else [spec.launcher],
                           spec.link_labels()):
        for comm in spec.comms:
            for kind in spec.kinds:
                for n in sorted(spec.workers):
                    per_worker = spec.weak_sentences if kind == "weak" else strong_split(
                        spec.strong_sentences, n)
                    tag = f"{label.replace('/', '_')}-{comm}-{kind}-n{n}"
                    out = work / f"{tag}.json"
                    command = worker_command(spec, comm, per_worker, out)
                    t0 = time.perf_counter()
                    result = _measure(spec, link, n, command, out, work / "logs" / tag)
                    result.update({"link": label, "comm": comm, "kind": kind,
                                   "wall_s": time.perf_counter() - t0})
                    runs.append(result)
                    log(f"{tag}: {result['tokens_per_s']:.0f} tok/s, step "
                        f"{1e3 * result['step_s']:.0f} ms (compute {1e3 * result['compute_s']:.0f}, "
                        f"comm {1e3 * result['comm_s']:.0f}) [{result['wall_s']:.0f} s]")
    rows = efficiency_rows(runs)
    if 1 not in spec.workers:
        log("no N=1 run: efficiencies appear once this study is merged (--merge) with one that has it")
    return {"spec": dataclasses.asdict(spec), "host": os.uname().nodename,
            "cpus": os.cpu_count(), "runs": runs, "rows": [dataclasses.asdict(r) for r in rows],
            "table_markdown": markdown_table(rows)}


def merge_studies(docs: Sequence[Dict[str, object]]) -> Dict[str, object]:
    """One document from several studies (e.g. one per link): runs concatenated, rows redone.
    A (link, comm, kind, N) measured twice is an error, not silently averaged."""
    runs: List[Dict[str, object]] = []
    seen = set()
    for doc in docs:
        for run in doc["runs"]:
            key = (run["link"], run["comm"], run["kind"], run["world"])
            if key in seen:
                raise ValueError(f"measurement {key} appears in more than one study")
            seen.add(key)
            runs.append(run)
    rows = efficiency_rows(runs)
    return {"specs": [d.get("spec", d.get("specs")) for d in docs],
            "host": docs[0].get("host") if docs else None, "runs": runs,
            "rows": [dataclasses.asdict(r) for r in rows], "table_markdown": markdown_table(rows)}


def write_json_new(path: Path, payload: Dict[str, object], overwrite: bool = False) -> None:
    """Write ``payload`` atomically; an existing file is kept unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: pass --overwrite to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(path)
