"""``tf-nmt plan``: predict a cluster run's step time, throughput, scaling efficiency and time to
solution over a range of node counts (:mod:`tf_nmt.planning`), from a compute probe of one step,
the model's real gradient bytes and an alpha-beta model of the network."""
from __future__ import annotations

import argparse
import json
import platform
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from tf_nmt.errors import UsageError

PROBE_FORMAT = "tf-nmt-plan-probe/1"


def parse_nodes(text: str) -> List[int]:
    """``1,2,4,...,256`` (a geometric or arithmetic run through ``...``, its step from the two
    numbers before it) or a plain list; increasing, each >= 1."""
    items = [s.strip() for s in text.split(",")]
    out: List[int] = []
    for i, item in enumerate(items):
        if item == "...":
            if len(out) < 2 or i + 1 >= len(items) or items[i + 1] == "...":
                raise UsageError(f"--nodes {text!r}: '...' needs two numbers before it and one after")
            continue
        if not re.fullmatch(r"[0-9]+", item) or int(item) < 1:
            raise UsageError(f"--nodes {text!r}: {item!r} is not a positive integer")
        value = int(item)
        if i > 0 and items[i - 1] == "...":
            a, b = out[-2], out[-1]
            geometric = b % a == 0 and b // a > 1
            while True:
                nxt = b * (b // a) if geometric else b + (b - a)
                if nxt >= value:
                    break
                out.append(nxt)
                a, b = b, nxt
            if nxt != value:
                raise UsageError(f"--nodes {text!r}: the run through '...' does not reach {value}")
        out.append(value)
    if any(b <= a for a, b in zip(out, out[1:])):
        raise UsageError(f"--nodes {text!r}: node counts must increase")
    return out


def cpu_terms(cores_per_node: Optional[int], cpu_ns: Optional[Dict[str, Optional[float]]],
              probed: Optional[Dict[str, float]], probe_source: str,
              graddrop_parallel: Optional[float] = None):
    """(the model's :class:`~tf_nmt.planning.model.Cpu`, where its constants came from)."""
    from tf_nmt.planning import model as pm

    values = {"gamma_s_per_byte": pm.GAMMA_S_PER_BYTE, "copy_s_per_byte": pm.COPY_S_PER_BYTE,
              "graddrop_s_per_entry": pm.GRADDROP_S_PER_ENTRY}
    source = "tf_nmt.planning.model defaults (a 2-core host's probe)"
    if probed:
        values = {k: float(probed[k]) for k in values}
        source = probe_source
    flags = {k: v for k, v in (cpu_ns or {}).items() if v is not None}
    unknown = set(flags) - set(CPU_FLAGS)
    if unknown:
        raise UsageError(f"unknown CPU constants {sorted(unknown)}: give {', '.join(CPU_FLAGS)}")
    for flag, value in flags.items():
        if not value >= 0:
            raise UsageError(f"--{flag}-ns must be >= 0, got {value}")
        values[CPU_FLAGS[flag]] = value * 1e-9
    if flags:
        source += "; --" + ", --".join(f"{k}-ns" for k in flags)
    return pm.Cpu(**values, cores_per_node=cores_per_node, graddrop_parallel=graddrop_parallel), source


#: ``--NAME-ns`` -> the :class:`tf_nmt.planning.model.Cpu` constant it sets (nanoseconds)
CPU_FLAGS = {"gamma": "gamma_s_per_byte", "copy": "copy_s_per_byte",
             "graddrop": "graddrop_s_per_entry"}


def probe(cfg, length: int = 32, steps: int = 3) -> Dict[str, Any]:
    """Measure the compute-only step of ``cfg`` and the exchange's CPU constants
    (:func:`tf_nmt.planning.probe.probe_cpu`) on this machine: the record ``--probe-file`` reads."""
    from tf_nmt.planning.probe import probe_cpu, probe_step_s
    from tf_nmt.training.trainer import build_and_compile

    if steps < 1 or length < 1:
        raise UsageError("--probe-steps and --probe-length must be >= 1")
    # compute only: the exchange's CPU work (graddrop's selection too) is the model's to add
    model = build_and_compile(cfg, cfg.data.vocab_size, exchange=False)
    drop = cfg.train.drop_ratio if 0.0 < cfg.train.drop_ratio < 1.0 else 0.99
    shapes = [v.shape for v in model.trainable_variables]
    # the add and copy on at least 64 MiB: rates, not a small model's per-call overhead
    gradient_bytes = 4 * sum(int(s.num_elements()) for s in shapes)
    cpu = probe_cpu(shapes, drop, nbytes=max(gradient_bytes, 2 ** 26), repeats=5)
    return {"format": PROBE_FORMAT, "step_s": probe_step_s(cfg, model, length, steps),
            "cpu": cpu,
            "batch_tokens": cfg.data.batch_tokens, "model": cfg.model.kind,
            "hparams": dict(cfg.model.hparams), "vocab_size": cfg.data.vocab_size,
            "host": platform.node(), "machine": platform.processor() or platform.machine()}


def read_probe(path: Path, cfg) -> float:
    """The step seconds of a recorded probe, refused when it probed another model or batch."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"--probe-file {path}: cannot read it ({err})") from None
    if not isinstance(record, dict) or record.get("format") != PROBE_FORMAT:
        raise UsageError(f"--probe-file {path}: not a tf-nmt plan --probe record")
    mine = {"batch_tokens": cfg.data.batch_tokens, "model": cfg.model.kind,
            "hparams": json.loads(json.dumps(dict(cfg.model.hparams))),
            "vocab_size": cfg.data.vocab_size}
    for key, value in mine.items():
        if record.get(key) != value:
            raise UsageError(f"--probe-file {path}: it probed {key}={record.get(key)!r}, this plan "
                             f"has {value!r}")
    return float(record["step_s"])


def _out_dir(out: Path, overwrite: bool) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise UsageError(f"{out} exists and is not empty: give --overwrite or another --out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The plan's rows as a text table."""
    extra = [k for k in ("time_to_steps_s", "time_to_tokens_s") if k in rows[0]]
    head = (f"{'nodes':>6} {'ranks':>6} {'compute s':>10} {'exchange s':>10} {'exposed s':>10} "
            f"{'step s':>9} {'tokens/s':>11} {'weak eff':>8} {'strong eff':>10}"
            + "".join(f" {'time to ' + k.split('_')[2]:>15}" for k in extra))
    lines = [head]
    for r in rows:
        lines.append(f"{r['nodes']:>6} {r['ranks']:>6} {r['compute_s']:>10.4f} "
                     f"{r['exchange_s']:>10.4f} {r['exposed_exchange_s']:>10.4f} "
                     f"{r['step_s']:>9.4f} {r['tokens_per_s']:>11.0f} "
                     f"{100 * r['weak_efficiency']:>7.1f}% {100 * r['strong_efficiency']:>9.1f}%"
                     + "".join(f" {_duration(r[k]):>15}" for k in extra))
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min"


def plot(rows: Sequence[Dict[str, Any]], path: Path, title: str) -> None:
    """Step time (compute and exposed exchange) and efficiency over node count, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tf_nmt.utils.io import write_bytes_atomic
    import io

    nodes = [r["nodes"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [str(n) for n in nodes]
    a.bar(labels, [r["compute_s"] for r in rows], label="compute")
    a.bar(labels, [r["exposed_exchange_s"] for r in rows],
          bottom=[r["compute_s"] for r in rows], label="exchange not hidden")
    a.set_xlabel("nodes"), a.set_ylabel("seconds per step"), a.legend()
    b.plot(nodes, [100 * r["weak_efficiency"] for r in rows], "o-", label="weak")
    b.plot(nodes, [100 * r["strong_efficiency"] for r in rows], "s-", label="strong")
    b.set_xscale("log", base=2), b.set_xlabel("nodes"), b.set_ylabel("efficiency %")
    b.set_ylim(0, 105), b.legend()
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())


def plan(preset_name: Optional[str], sets: Sequence[str], nodes: Sequence[int],
         ranks_per_node: int = 1, network: str = "10gbit", alpha_us: Optional[float] = None,
         bandwidth_gbit: Optional[float] = None, out: Optional[Path] = None,
         overwrite: bool = False, probe_only: bool = False, probe_file: Optional[Path] = None,
         compute_seconds: Optional[float] = None, compute_factor: float = 1.0,
         probe_steps: int = 3, probe_length: int = 32, overlap: float = 0.5,
         fusion_mb: float = 128.0, cycle_ms: Optional[float] = None, steps: Optional[int] = None,
         tokens: Optional[float] = None, config_file: Optional[Path] = None,
         quiet: bool = False, cores_per_node: Optional[int] = None,
         cpu_ns: Optional[Dict[str, float]] = None,
         graddrop_parallel: Optional[float] = None) -> Dict[str, Any]:
    """Plan a run (or, ``probe_only``, record this machine's probe in ``out``): the result
    written to ``out``/plan.json and plan.png and returned. Compute per rank comes from one of
    ``probe_file``, ``compute_seconds`` (seconds of one step on the target node) or a probe here,
    divided by ``compute_factor`` (the target node's speed relative to the probed one).
    The exchange's CPU constants (:class:`tf_nmt.planning.model.Cpu`) come from ``cpu_ns``
    (nanoseconds: ``gamma``, ``copy`` per byte, ``graddrop`` per entry), else the probe (file or
    here), else this package's defaults; ``cores_per_node`` counts the slow-down of ranks that
    share a node's cores, ``graddrop_parallel`` (default: the cores) that of their GradDrop
    exchanges."""
    from tf_nmt.commands.train import build_config
    from tf_nmt.planning import model as pm
    from tf_nmt.planning.network import network as make_network
    from tf_nmt.planning.probe import count_gradients, step_bytes
    from tf_nmt.training.trainer import build_model_for_training
    from tf_nmt.utils.io import write_json_atomic, write_text_atomic

    cfg = build_config(preset_name, config_file, sets)
    out = Path(out) if out is not None else Path(f"plan-{preset_name or 'config'}")
    if probe_only:
        given = [n for n, v in (("--probe-file", probe_file), ("--compute-seconds", compute_seconds),
                                ("--steps", steps), ("--tokens", tokens),
                                ("--cores-per-node", cores_per_node),
                                ("--graddrop-parallel", graddrop_parallel)) if v is not None]
        given += [f"--{k}-ns" for k in (cpu_ns or {}) if cpu_ns[k] is not None]
        if given:
            raise UsageError(f"--probe only measures this machine: {', '.join(given)} would be "
                             "ignored")
        record = probe(cfg, probe_length, probe_steps)
        write_json_atomic(_out_dir(out, overwrite) / "probe.json", record)
        if not quiet:
            cpu = record["cpu"]
            print(f"probe: {record['step_s']:.4f} s per step of {record['batch_tokens']} tokens; "
                  f"add {1e9 * cpu['gamma_s_per_byte']:.3f} ns/byte, copy "
                  f"{1e9 * cpu['copy_s_per_byte']:.3f} ns/byte, graddrop "
                  f"{1e9 * cpu['graddrop_s_per_entry']:.2f} ns/entry; "
                  f"recorded in {out / 'probe.json'} (give it to --probe-file)")
        return record
    if probe_file is not None and compute_seconds is not None:
        raise UsageError("give --probe-file or --compute-seconds, not both")
    if not compute_factor > 0:
        raise UsageError(f"--compute-factor must be > 0, got {compute_factor}")
    if compute_seconds is not None and not compute_seconds > 0:
        raise UsageError(f"--compute-seconds must be > 0, got {compute_seconds}")
    if ranks_per_node < 1:
        raise UsageError(f"--ranks-per-node must be >= 1, got {ranks_per_node}")
    if steps is not None and steps < 1 or tokens is not None and not tokens > 0:
        raise UsageError("--steps and --tokens must be positive")
    if not nodes:
        raise UsageError("--nodes is empty")
    # bad CPU arguments fail before any probe
    cpu_terms(cores_per_node, cpu_ns, None, "", graddrop_parallel)
    net = make_network(network, alpha_us, bandwidth_gbit)
    if cycle_ms is None:  # what tf-nmt train's ranks will run with
        from tf_nmt.distributed.context import horovod_cycle_time

        cycle_ms = horovod_cycle_time()
    hvd = pm.Horovod(fusion_mb * 2 ** 20, cycle_ms * 1e-3, overlap)
    out = _out_dir(out, overwrite)
    probed_cpu: Optional[Dict[str, float]] = None
    if probe_file is not None:
        source, measured = f"probe file {probe_file}", read_probe(probe_file, cfg)
        probed_cpu = json.loads(Path(probe_file).read_text()).get("cpu")  # older records: none
    elif compute_seconds is not None:
        source, measured = "--compute-seconds", float(compute_seconds)
    else:
        record = probe(cfg, probe_length, probe_steps)
        source, measured, probed_cpu = "probe on this machine", record["step_s"], record["cpu"]
    cpu, cpu_source = cpu_terms(cores_per_node, cpu_ns, probed_cpu, source, graddrop_parallel)
    compute_s = measured / compute_factor
    tokens_per_rank = float(cfg.data.batch_tokens * cfg.train.backward_passes_per_step)
    grads = count_gradients(build_model_for_training(cfg, cfg.data.vocab_size, policy="float32"),
                            cfg.data.vocab_size)
    bytes_ = step_bytes(cfg, grads, cfg.data.batch_tokens)
    rows = pm.table(nodes, ranks_per_node, compute_s, tokens_per_rank, bytes_, bytes_, net, hvd,
                    steps, tokens, cpu)
    result = {"preset": preset_name, "sets": list(sets), "comm": cfg.train.comm,
              "ranks_per_node": ranks_per_node, "network": net.to_dict(),
              "horovod": {"fusion_bytes": hvd.fusion_bytes, "cycle_s": hvd.cycle_s,
                          "overlap": hvd.overlap, "backward_share": pm.BACKWARD_SHARE,
                          "cycle_wait": hvd.cycle_wait},
              "cpu": {**cpu.to_dict(), "source": cpu_source},
              "compute": {"source": source, "measured_step_s": measured,
                          "compute_factor": compute_factor, "step_s": compute_s,
                          "tokens_per_rank": tokens_per_rank},
              "gradients": grads.to_dict(), "step_bytes": bytes_.to_dict(), "rows": rows}
    write_json_atomic(out / "plan.json", result)
    title = (f"{preset_name or 'config'}, comm {cfg.train.comm}, {ranks_per_node} ranks/node, "
             f"{net.name}")
    plot(rows, out / "plan.png", title)
    text = format_table(rows)
    write_text_atomic(out / "plan.txt", text + "\n")
    if not quiet:
        print(f"{title}; compute {compute_s:.4f} s/step ({source}); "
              f"{grads.parameters:,} parameters")
        print(text)
        print(f"wrote {out / 'plan.json'}, {out / 'plan.png'}, {out / 'plan.txt'}")
    return result


def _cmd(args: argparse.Namespace) -> int:
    plan(args.preset, args.set, parse_nodes(args.nodes) if not args.probe else [],
         args.ranks_per_node, args.network, args.alpha_us, args.bandwidth_gbit, args.out,
         args.overwrite, args.probe, args.probe_file, args.compute_seconds, args.compute_factor,
         args.probe_steps, args.probe_length, args.overlap, args.fusion_mb, args.cycle_ms,
         args.steps, args.tokens, args.config, cores_per_node=args.cores_per_node,
         graddrop_parallel=args.graddrop_parallel,
         cpu_ns={k: getattr(args, f"{k}_ns") for k in CPU_FLAGS})
    return 0


def add_plan_parser(subparsers) -> None:
    """The ``plan`` subcommand."""
    from tf_nmt.config import PRESETS
    from tf_nmt.planning.network import PRESETS as NETWORKS

    p = subparsers.add_parser("plan", help="predict step time, throughput and scaling over N nodes",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", help=f"a named preset ({', '.join(PRESETS)})")
    p.add_argument("--config", type=Path, help="a config file")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (repeatable), e.g. --set train.comm=graddrop")
    p.add_argument("--nodes", default=None, help="node counts, e.g. 1,2,4,...,256")
    p.add_argument("--ranks-per-node", type=int, default=1)
    p.add_argument("--network", default="10gbit", help=f"{', '.join(NETWORKS)} or custom")
    p.add_argument("--alpha-us", type=float, help="override the network's latency (microseconds)")
    p.add_argument("--bandwidth-gbit", type=float, help="override the network's bandwidth")
    p.add_argument("--out", type=Path, help="output folder (default ./plan-<preset>/)")
    p.add_argument("--overwrite", action="store_true", help="replace the files in a non-empty --out")
    p.add_argument("--probe", action="store_true",
                   help="only measure this machine's step and record it in --out/probe.json")
    p.add_argument("--probe-file", type=Path, help="a probe.json recorded on the target node")
    p.add_argument("--compute-seconds", type=float,
                   help="seconds of one compute-only step on the target node (no probe)")
    p.add_argument("--compute-factor", type=float, default=1.0,
                   help="the target node's speed relative to the probed one (2: twice as fast)")
    p.add_argument("--probe-steps", type=int, default=3)
    p.add_argument("--probe-length", type=int, default=32, help="tokens per probe sentence")
    p.add_argument("--overlap", type=float, default=0.5,
                   help="fraction of the backward pass that hides exchange, in [0, 1]")
    p.add_argument("--fusion-mb", type=float, default=128.0, help="HOROVOD_FUSION_THRESHOLD, MiB")
    p.add_argument("--cycle-ms", type=float, default=None,
                   help="HOROVOD_CYCLE_TIME, ms (default: what tf-nmt train uses, $HOROVOD_CYCLE_TIME or 10)")
    p.add_argument("--cores-per-node", type=int, default=None,
                   help="cores of a node: ranks beyond them slow the exchange's CPU work by "
                        "ranks/cores (default: at least a core per rank)")
    p.add_argument("--graddrop-parallel", type=float, default=None, metavar="P",
                   help="how many ranks' GradDrop exchanges a node runs at once at full speed "
                        "(default: --cores-per-node; fewer where the ranks share the memory "
                        "bandwidth: GradDrop streams the gradient and its residual)")
    p.add_argument("--gamma-ns", type=float, default=None,
                   help="ns per byte of a float32 add (the allreduce's reduction; default: "
                        "the probe's, else this package's)")
    p.add_argument("--copy-ns", type=float, default=None,
                   help="ns per byte of a memory copy (Horovod's fusion buffer)")
    p.add_argument("--graddrop-ns", type=float, default=None,
                   help="ns per gradient entry of GradDrop's own compute")
    p.add_argument("--steps", type=int, help="also give the time to this many steps")
    p.add_argument("--tokens", type=float, help="also give the time to this many target tokens")
    p.set_defaults(func=_check_and_run)


def _check_and_run(args: argparse.Namespace) -> int:
    if args.probe and args.nodes is not None:
        raise UsageError("--probe only measures this machine: --nodes would be ignored")
    if not args.probe and args.nodes is None:
        raise UsageError("tf-nmt plan needs --nodes, e.g. --nodes 1,2,4,...,64")
    return _cmd(args)
