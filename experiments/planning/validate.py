"""``tf-nmt plan``'s exchange model against the emulated cluster (issue 58, item 2).

For every point of hosts x link rate x comm mode it runs the scaling study's step worker on the
emulated cluster (:func:`experiments.scaling.cluster.study.run_study`: one rank per network
namespace, ``tc tbf`` links) and takes the measured exchange time per step and the bytes each
host sent on its link per step. The exchange time held to the model is ``exchange_only_s``: the worker's
exchange timed alone (its ``--exchange-steps``: one fixed gradient applied through the
distributed optimizer and through the local one, each update released on all ranks by a barrier
and, after it, the same wait on every rank spread over Horovod's cycle across the updates, so the
collective meets Horovod's loop at a random phase of its cycle as in training; in alternating
blocks; the median over blocks of the difference of the blocks' medians, averaged over ranks),
so the time a rank waits for another's slower backward pass on the shared cores is not counted
as exchange. Beside it: ``comm_paired_s``, the whole training step's share (the
median over blocks of the block's median step - the preceding compute block's median, rank 0's
times), which holds that waiting, and the worker's min-based ``comm_s``.
Per hosts x link it first runs the cluster's link bench
(:func:`experiments.scaling.cluster.cluster_cli.bench`): the median time of an allreduce of one
float32 (one collective's fixed cost) and of ``--bench-megabytes``.

Beside each point goes the model's prediction (:mod:`tf_nmt.planning`) for the same model
variables (:func:`tf_nmt.planning.probe.step_bytes` of the worker's config), N nodes of one rank,
Horovod's fusion threshold and the cycle time the ranks ran with, on ``--network custom`` with

* ``rate``: the link's tc rate as the bandwidth and the bench's latency
  ``alpha = max(0, t_small - cycle) / (2 (N - 1))`` (what is left of a one-float allreduce after
  Horovod's cycle, per ring step);
* ``bench``: the same latency and the bandwidth the bench reached,
  ``2 (N - 1)/N * S / (t_S - t_small)`` (the host's own limits: on 2 shared cores the emulated
  10 Gbit/s link is not the bottleneck).

and the relative error ``(predicted - measured) / measured`` of exchange time and link bytes.
Both variants carry the model's CPU terms (:class:`tf_nmt.planning.model.Cpu`) with the constants
of ``cpu_probe`` (:func:`measure_cpu`: probed once on one process, seconds, before any point; again
with ``--probe-cpu``), all emulated hosts sharing this machine's cores, their GradDrop exchanges
as many at once as :mod:`experiments.planning.parallel_probe` measured (``graddrop_parallel``); ``bench_alphabeta`` is the
alpha-beta model alone (no CPU terms, a whole cycle a round). ``--resume`` on a complete file
measures nothing (no bench, no point) and recomputes every prediction.

On 2 shared cores the compute column of these runs is contention (N ranks share 2 cores), not
a node's compute: only the exchange is validated.

    python -m experiments.planning.validate [--resume | --overwrite] [--probe-cpu]
    python -m experiments plan-validate [--resume | --overwrite]
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from experiments.lib import common
from tf_nmt.errors import UsageError

RESULTS = common.results_path(__file__, "validate.json")
#: the scaling study's small Transformer (1,363,776 parameters at an 8,000 vocabulary)
MODEL = ["model.num_layers=1", "model.d_model=128", "model.num_heads=2", "model.ff_dim=256"]
#: bench and rate: the model with its CPU terms; bench_alphabeta: the bench's network with the
#: alpha-beta model alone (no CPU terms, a whole cycle waited per round), the model before them
VARIANTS = ("rate", "bench", "bench_alphabeta")
#: the measured exchange the model is held to (the worker's exchange timed alone)
MEASURED = "exchange_only_s"
TARGETS = {"median": 0.15, "worst": 0.30}
BENCH_TAG = "plnv"
#: the CPU constants of the model's exchange (:class:`tf_nmt.planning.model.Cpu`) in ``cpu_probe``
CPU_CONSTANTS = ("gamma_s_per_byte", "copy_s_per_byte", "graddrop_s_per_entry")
CPU_PROBE_REPEATS = 31


def settings_of(args: argparse.Namespace) -> Dict[str, Any]:
    """What a point's measurement depends on (``--resume`` requires the file's to be equal)."""
    return {"hosts": list(args.hosts), "links": list(args.links), "comms": list(args.comms),
            "overrides": [*MODEL, *args.set], "sentences": args.sentences, "src_len": args.length,
            "tgt_len": args.length, "vocab_size": args.vocab_size, "steps": args.steps,
            "warmup": args.warmup, "block": args.block, "estimator": args.estimator,
            "threads": 1, "exchange_steps": args.steps, "bench_megabytes": args.bench_megabytes,
            "bench_repeats": args.bench_repeats}


def point_key(hosts: int, link: str, comm: str) -> str:
    return f"h{hosts}-{link}-{comm}"


def bench_key(hosts: int, link: str) -> str:
    return f"h{hosts}-{link}"


def measure_bench(hosts: int, link: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The cluster's link bench on ``hosts`` hosts at ``link``: its times and the network it
    implies for the model (latency and reached bandwidth)."""
    from experiments.scaling.cluster.cluster_cli import bench  # noqa: PLC0415 - imports Horovod

    r = bench(hosts, link, megabytes=settings["bench_megabytes"], repeats=settings["bench_repeats"],
              tag=BENCH_TAG)
    return {"hosts": hosts, "link": link, "rate_bits": r["link"]["rate_bits"], "bytes": r["bytes"],
            "times_s": r["times_s"], "median_s": r["median_s"], "small_times_s": r["small_times_s"],
            "small_median_s": r["small_median_s"], "cycle_s": _cycle_s(),
            **_measured_at()}


def _measured_at() -> Dict[str, Any]:
    """The revision a bench or point was measured at (the file's ``provenance`` is the last
    write's, which may only have recomputed the predictions with ``--resume``)."""
    return {f"measured_{k}": v for k, v in common.git_revision().items()}


def measure_cpu(settings: Dict[str, Any], command: str) -> Dict[str, Any]:
    """The model's CPU constants probed on this machine, one process, on the validated model's
    gradient (:func:`tf_nmt.planning.probe.probe_cpu`), with the cores the emulated hosts share,
    how many of their GradDrop exchanges the machine runs at once at full speed
    (:mod:`experiments.planning.parallel_probe`, one process per core) and the provenance."""
    import datetime  # noqa: PLC0415
    import os  # noqa: PLC0415

    from experiments.scaling.cluster.modes import mode_overrides  # noqa: PLC0415
    from tf_nmt.config import load_config  # noqa: PLC0415
    from experiments.planning import parallel_probe  # noqa: PLC0415
    from tf_nmt.planning.probe import probe_cpu  # noqa: PLC0415
    from tf_nmt.training.trainer import build_model_for_training  # noqa: PLC0415

    cfg = load_config(overrides=[*settings["overrides"], *mode_overrides("graddrop")])
    model = build_model_for_training(cfg, settings["vocab_size"], policy="float32")
    record = probe_cpu([v.shape for v in model.trainable_variables], cfg.train.drop_ratio,
                       repeats=CPU_PROBE_REPEATS)
    cores = os.cpu_count() or 1
    parallel = parallel_probe.measure(cores, settings["overrides"], settings["vocab_size"])
    return {**record, "cores": cores, "graddrop_parallel": parallel["graddrop_parallel"],
            "graddrop_parallel_probe": parallel, "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **_measured_at()}


def _cycle_s() -> float:
    """HOROVOD_CYCLE_TIME of the ranks (they run in this environment), seconds."""
    from tf_nmt.distributed.context import horovod_cycle_time  # noqa: PLC0415

    return horovod_cycle_time() / 1e3


def measure_point(hosts: int, link: str, comm: str, settings: Dict[str, Any], work: Path,
                  log: Callable[[str], None] = print) -> Dict[str, Any]:
    """One run of the scaling study's worker: measured exchange time and link bytes per step."""
    from experiments.lib.step_split import paired_difference  # noqa: PLC0415
    from experiments.scaling.cluster.study import StudySpec, run_study  # noqa: PLC0415

    spec = StudySpec(workers=[hosts], kinds=["weak"], comms=[comm], launcher="emulated",
                     links=[link], weak_sentences=settings["sentences"],
                     src_len=settings["src_len"], tgt_len=settings["tgt_len"],
                     vocab_size=settings["vocab_size"], overrides=list(settings["overrides"]),
                     steps=settings["steps"], warmup=settings["warmup"], block=settings["block"],
                     threads=settings["threads"], estimator=settings["estimator"],
                     exchange_steps=settings["exchange_steps"])
    run = run_study(spec, work / point_key(hosts, link, comm), log=log)["runs"][0]
    keep = ("world", "rank0_step_times_s", "rank0_compute_times_s", "step_s", "compute_s",
            "comm_s", "comm_s_raw", "step_min_s", "step_median_s", "compute_min_s",
            "compute_median_s", "payload_bytes_per_step", "predicted_link_bytes_per_step",
            "link_bytes_per_step", "num_parameters", "wall_s", "exchange_only_s",
            "rank0_exchange_update_times_s", "rank0_local_update_times_s",
            "exchange_phase_offsets_s")
    return {"hosts": hosts, "link": link, "comm": comm,
            **{k: run.get(k) for k in keep},
            "comm_paired_s": paired_difference(run["rank0_step_times_s"],
                                               run["rank0_compute_times_s"], settings["block"]),
            "cycle_s": _cycle_s(), **_measured_at()}


def _error(predicted: float, measured: float) -> Optional[float]:
    """``(predicted - measured) / measured``; None where nothing positive was measured."""
    return (predicted - measured) / measured if measured > 0 else None


def cpu_of(doc: Dict[str, Any], variant: str):
    """The model's CPU terms for ``variant``: the file's probed constants, all emulated hosts
    sharing the machine's cores (none for ``bench_alphabeta``)."""
    from tf_nmt.planning import model as pm  # noqa: PLC0415

    if variant == "bench_alphabeta":
        return pm.NO_CPU
    probe = doc["cpu_probe"]
    return pm.Cpu(**{k: probe[k] for k in CPU_CONSTANTS}, cores_per_node=probe["cores"],
                  graddrop_parallel=probe["graddrop_parallel"])


def network_of(bench: Dict[str, Any], variant: str, cpu=None):
    """The model's network for one bench: the latency it measured and the link's rate
    (``rate``) or the bandwidth it reached (``bench``, ``bench_alphabeta``), what is left of
    its allreduce after its CPU work (``cpu``, all of its hosts sharing the cores)."""
    from tf_nmt.distributed.accounting import ring_allreduce_bytes  # noqa: PLC0415
    from tf_nmt.planning import model as pm  # noqa: PLC0415
    from tf_nmt.planning.network import network  # noqa: PLC0415

    n = bench["hosts"]
    cpu = cpu or pm.NO_CPU
    alpha_s = max(0.0, bench["small_median_s"] - bench["cycle_s"]) / (2 * (n - 1))
    if variant == "rate":
        bits = bench["rate_bits"]
    elif variant in ("bench", "bench_alphabeta"):
        wire_s = (bench["median_s"] - bench["small_median_s"]
                  - cpu.sharing(n) * pm.allreduce_cpu_s(bench["bytes"], n, cpu))
        bits = min(bench["rate_bits"], 8 * ring_allreduce_bytes(bench["bytes"], n) / wire_s)
    else:
        raise ValueError(f"unknown variant {variant!r}: {', '.join(VARIANTS)}")
    return network("custom", alpha_us=alpha_s * 1e6, bandwidth_gbit=bits / 1e9)


def step_bytes_of(comm: str, settings: Dict[str, Any]):
    """The model's collective input per step for ``comm`` (its real variables, built here)."""
    from experiments.scaling.cluster.modes import mode_overrides  # noqa: PLC0415
    from tf_nmt.config import load_config  # noqa: PLC0415
    from tf_nmt.planning.probe import count_gradients, step_bytes  # noqa: PLC0415
    from tf_nmt.training.trainer import build_model_for_training  # noqa: PLC0415

    cfg = load_config(overrides=[*settings["overrides"], *mode_overrides(comm)])
    vocab = settings["vocab_size"]
    grads = count_gradients(build_model_for_training(cfg, vocab, policy="float32"), vocab)
    # tokens per rank and step: the worker's source and target sentences of tgt_len
    return step_bytes(cfg, grads, settings["sentences"] * settings["tgt_len"])


def predict(point: Dict[str, Any], bench: Dict[str, Any], step, variant: str,
            doc: Dict[str, Any]) -> Dict[str, float]:
    """The model's exchange seconds and link bytes for one measured point, with the errors."""
    from tf_nmt.planning import model as pm  # noqa: PLC0415

    cpu = cpu_of(doc, variant)
    net = network_of(bench, variant, cpu)
    hvd = pm.Horovod(cycle_s=point["cycle_s"], cycle_wait=1.0 if variant == "bench_alphabeta"
                     else pm.Horovod.cycle_wait)
    # every emulated host is a process on this machine: all of them share its cores
    ex = pm.exchange_s(step, point["hosts"], 1, net, hvd, cpu, sharing_ranks=point["hosts"])
    sent = pm.link_bytes(step, point["hosts"], 1)
    return {"alpha_us": net.alpha_s * 1e6, "bandwidth_gbit": net.bandwidth_Bps * 8 / 1e9,
            "exchange_s": ex, "link_bytes": sent,
            "exchange_error": _error(ex, point[MEASURED]),
            "exchange_paired_error": _error(ex, point["comm_paired_s"]),
            "exchange_min_error": _error(ex, point["comm_s"]),
            "bytes_error": _error(sent, point["link_bytes_per_step"])}


def compare(doc: Dict[str, Any], step_of: Callable[[str], Any]) -> Dict[str, Any]:
    """Predictions beside every point of ``doc`` and the summary of the errors per variant."""
    points = []
    for point in doc["points"]:
        bench = doc["benches"][bench_key(point["hosts"], point["link"])]
        step = step_of(point["comm"])
        points.append({**point, "step_bytes": step.to_dict(),
                       "predicted": {v: predict(point, bench, step, v, doc) for v in VARIANTS}})
    summary = {}
    for v in VARIANTS:
        entry = {}
        for what in ("exchange", "exchange_paired", "exchange_min", "bytes"):
            raw = [p["predicted"][v][f"{what}_error"] for p in points]
            # a point with nothing measured counts as the worst error there is
            errors = [abs(e) if e is not None else float("inf") for e in raw]
            finite = lambda x: x if x != float("inf") else None  # noqa: E731 - JSON has no inf
            entry[what] = {"median_abs_error": finite(statistics.median(errors)) if raw else None,
                           "worst_abs_error": finite(max(errors)) if raw else None,
                           "unmeasured_points": raw.count(None)}
        entry["groups"] = {}
        for link in doc["settings"]["links"]:
            for kind, comms in (("allreduce", ("dense", "sparse_as_dense")),
                                ("allgather", ("graddrop",))):
                errors = [abs(p["predicted"][v]["exchange_error"]) for p in points
                          if p["link"] == link and p["comm"] in comms
                          and p["predicted"][v]["exchange_error"] is not None]
                if errors:
                    entry["groups"][f"{link}-{kind}"] = {
                        "points": len(errors), "median_abs_error": statistics.median(errors),
                        "worst_abs_error": max(errors)}
        ex = entry["exchange"]
        entry["meets_targets"] = (bool(points) and None not in (ex["median_abs_error"],
                                                                 ex["worst_abs_error"])
                                  and ex["median_abs_error"] <= TARGETS["median"]
                                  and ex["worst_abs_error"] <= TARGETS["worst"])
        summary[v] = entry
    return {"points": points, "summary": summary}


def table(doc: Dict[str, Any]) -> str:
    """Every point: measured and predicted exchange time and link bytes, with errors."""
    def pct(e: Optional[float]) -> str:
        return "n/a" if e is None else f"{100 * e:+.0f}%"

    def size(e: Optional[float]) -> str:
        return "n/a" if e is None else f"{100 * e:.0f}%"

    lines = ["| hosts | link | comm | measured ms (alone; step paired; step min-based) | "
             "rate ms (err) | "
             "bench ms (err) | measured MB | predicted MB (err) |",
             "|---|---|---|---|---|---|---|---|"]
    for p in doc["points"]:
        r, b = p["predicted"]["rate"], p["predicted"]["bench"]
        lines.append(
            f"| {p['hosts']} | {p['link']} | {p['comm']} | {1e3 * p[MEASURED]:.1f}; "
            f"{1e3 * p['comm_paired_s']:.1f}; {1e3 * p['comm_s']:.1f} | "
            f"{1e3 * r['exchange_s']:.1f} ({pct(r['exchange_error'])}) | "
            f"{1e3 * b['exchange_s']:.1f} ({pct(b['exchange_error'])}) | "
            f"{p['link_bytes_per_step'] / 1e6:.3f} | {r['link_bytes'] / 1e6:.3f} "
            f"({pct(r['bytes_error'])}) |")
    for v, s in doc["summary"].items():
        ex, by = s["exchange"], s["bytes"]
        lines.append(f"\n{v}: exchange median {size(ex['median_abs_error'])} / worst "
                     f"{size(ex['worst_abs_error'])}, bytes median "
                     f"{size(by['median_abs_error'])} / worst {size(by['worst_abs_error'])} "
                     f"({'meets' if s['meets_targets'] else 'misses'} median <= 15%, worst <= 30%)")
        for name, g in s["groups"].items():
            lines.append(f"  {name}: exchange median {100 * g['median_abs_error']:.0f}% / worst "
                         f"{100 * g['worst_abs_error']:.0f}% over {g['points']} points")
    return "\n".join(lines)


def readme_table(doc: Dict[str, Any], rel: str = "experiments/planning/results/validate.json",
                 variant: str = "bench") -> str:
    """The README's table of every point, each figure with its ``<!-- fig -->`` marker (checked
    against ``rel`` by tests/docs)."""
    def fig(value: float, key: str, fmt: str, scale: str = "") -> str:
        return f"{value:{fmt}} <!-- fig {rel} {key}{' ' + scale if scale else ''} -->"

    lines = ["| hosts | link | comm | measured exchange ms | predicted ms | error "
             "| measured MB/step "
             "| predicted MB/step | error |", "|---|---|---|---|---|---|---|---|---|"]
    for i, p in enumerate(doc["points"]):
        pre, q = f"points.{i}", p["predicted"][variant]
        mine = f"{pre}.predicted.{variant}"
        cells = [fig(1e3 * p[MEASURED], f"{pre}.{MEASURED}", ".1f", "*1000"),
                 fig(1e3 * q["exchange_s"], f"{mine}.exchange_s", ".1f", "*1000"),
                 fig(100 * q["exchange_error"], f"{mine}.exchange_error", ".0f", "*100") + "%",
                 fig(p["link_bytes_per_step"] / 1e6, f"{pre}.link_bytes_per_step", ".3f",
                     "/1000000"),
                 fig(q["link_bytes"] / 1e6, f"{mine}.link_bytes", ".3f", "/1000000"),
                 fig(100 * q["bytes_error"], f"{mine}.bytes_error", ".0f", "*100") + "%"]
        lines.append(f"| {p['hosts']} | {p['link']} | {p['comm']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _load(path: Path, settings: Dict[str, Any]) -> Dict[str, Any]:
    import json  # noqa: PLC0415

    if not path.is_file():
        raise UsageError(f"--resume: there is no {path} to resume")
    doc = json.loads(path.read_text())
    if doc.get("settings") != settings:
        raise UsageError(f"--resume: {path} was measured with other settings; give the same "
                         "options or --overwrite")
    return doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.planning.validate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=common.parse_ranks, default=(2, 3, 4), help="e.g. 2,3,4")
    p.add_argument("--links", type=lambda s: [x for x in s.split(",") if x],
                   default=["100mbit", "1gbit", "10gbit"], help="tc rates, e.g. 100mbit,1gbit")
    p.add_argument("--comms", type=lambda s: [x for x in s.split(",") if x],
                   default=["dense", "sparse_as_dense", "graddrop"])
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="more config overrides on top of the small Transformer")
    p.add_argument("--sentences", type=int, default=16, help="per rank and step")
    p.add_argument("--length", type=int, default=24, help="source and target tokens a sentence")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--block", type=int, default=2)
    p.add_argument("--estimator", choices=("min", "median"), default="min")
    p.add_argument("--bench-megabytes", type=float, default=5.5)
    p.add_argument("--bench-repeats", type=int, default=7)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--resume", action="store_true", help="keep the points already in --out")
    p.add_argument("--overwrite", action="store_true", help="replace --out")
    p.add_argument("--probe-cpu", action="store_true",
                   help="measure the CPU constants again (seconds) even if --out has them")
    args = p.parse_args(argv)
    if args.resume and args.overwrite:
        raise UsageError("give --resume or --overwrite, not both")
    if min(args.hosts) < 2:
        raise UsageError(f"--hosts: an exchange needs at least 2 hosts, got {args.hosts}")
    from experiments.scaling.cluster.modes import mode_overrides  # noqa: PLC0415

    for comm in args.comms:
        try:
            mode_overrides(comm)
        except ValueError as err:
            raise UsageError(str(err)) from None
    settings = settings_of(args)
    if args.resume:
        doc = _load(args.out, settings)
    else:
        common.refuse_existing([args.out], args.overwrite)
        doc = {"settings": settings, "benches": {}, "points": []}
    command = shlex.join(["python", "-m", "experiments.planning.validate",
                          *(sys.argv[1:] if argv is None else argv)])
    steps: Dict[str, Any] = {}

    def step_of(comm: str):
        if comm not in steps:
            steps[comm] = step_bytes_of(comm, settings)
        return steps[comm]

    if args.probe_cpu or "cpu_probe" not in doc:
        doc["cpu_probe"] = measure_cpu(settings, command)

    def save() -> Dict[str, Any]:
        measured = {"settings": settings, "cpu_probe": doc["cpu_probe"], "benches": doc["benches"],
                    "points": [{k: v for k, v in pt.items() if k not in ("predicted", "step_bytes")}
                               for pt in doc["points"]]}
        full = {"command": command, **measured, **compare(measured, step_of), "note": NOTE}
        common.write_result(args.out, full, overwrite=True)
        return full

    done = {point_key(pt["hosts"], pt["link"], pt["comm"]) for pt in doc["points"]}
    with tempfile.TemporaryDirectory(prefix="tfnmt-plan-validate-") as tmp:
        for hosts in args.hosts:
            for link in args.links:
                if bench_key(hosts, link) not in doc["benches"]:
                    doc["benches"][bench_key(hosts, link)] = measure_bench(hosts, link, settings)
                    save()
                for comm in args.comms:
                    if point_key(hosts, link, comm) in done:
                        print(f"{point_key(hosts, link, comm)}: in {args.out}, kept")
                        continue
                    doc["points"].append(measure_point(hosts, link, comm, settings, Path(tmp)))
                    save()
    full = save()
    print("\n" + table(full))
    print(f"wrote {args.out}")
    return 0


NOTE = ("On 2 shared cores the N ranks' compute is contention (they share the cores), so the "
        "compute column of these runs says nothing about a node: only the exchange (exchange_only_s, "
        "link bytes) is validated.")


if __name__ == "__main__":
    from tf_nmt.errors import UserError

    try:
        raise SystemExit(main())
    except UserError as err:
        print(f"validate: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
