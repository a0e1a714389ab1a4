"""Weak/strong scaling study: tokens/s, step time and its compute/communication split, and
efficiency (speed-up / N) for each comm mode, written as JSON + Markdown table + PNG plots.

    # this machine (horovodrun -np N -H localhost:N)
    python -m experiments scaling --launcher local --workers 1,2 --comm dense,sparse_as_dense --out results/s.json
    # emulated hosts (root): one rank per network namespace, links shaped with tc
    python -m experiments scaling --launcher emulated --link 100mbit --link 10gbit --workers 1,2,4 ...
    # a real cluster (horovodrun --hostfile / -H, or mpirun with --controller mpi);
    # --dry-run prints the commands. The --work-dir must be on a file system rank 0 shares.
    python -m experiments scaling --launcher cluster --hostfile hosts.txt --workers 1,8,16 --dry-run

Model and config: --preset / --set section.key=value, as for tf-nmt train.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence

from experiments.lib import common
from experiments.scaling.cluster.efficiency import strong_split
from experiments.scaling.cluster.signals import interrupt_on_signals
from experiments.scaling.cluster.study import (LAUNCHERS, StudySpec, launch_command, merge_studies,
                                  run_study, worker_command, write_json_new)


def _ints(text: str):
    return [int(v) for v in text.split(",") if v.strip()]


def _names(text: str):
    return [v.strip() for v in text.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launcher", choices=LAUNCHERS, default="local")
    p.add_argument("--workers", type=_ints, default=[1, 2], help="e.g. 1,2,4 (efficiency needs N=1 here or in a study merged later)")
    p.add_argument("--kinds", type=_names, default=["weak", "strong"], help="weak,strong")
    p.add_argument("--comm", type=_names, default=["dense", "sparse_as_dense"],
                   help="comm modes, e.g. dense,sparse_as_dense,graddrop")
    p.add_argument("--link", action="append", help="emulated link rate (repeatable), e.g. 100mbit")
    p.add_argument("--delay", default="0", help="emulated one-way delay (needs netem)")
    p.add_argument("--hosts", help="cluster: host1:4,host2:4")
    p.add_argument("--hostfile", help="cluster: lines 'host slots=N'")
    p.add_argument("--controller", choices=("gloo", "mpi"), default="gloo")
    p.add_argument("--weak-sentences", type=int, default=32, help="per-worker batch (weak)")
    p.add_argument("--strong-sentences", type=int, default=64, help="global batch (strong)")
    p.add_argument("--src-len", type=int, default=24)
    p.add_argument("--tgt-len", type=int, default=24)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--preset")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--estimator", choices=("min", "median"), default="min",
                   help="per-step statistic (min resists load from other processes)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--work-dir", type=Path, help="per-run JSON and logs (default: a temp dir)")
    p.add_argument("--out", type=Path, default=common.results_path(__file__, "scaling.json"))
    p.add_argument("--plots-dir", type=Path, help="default: next to --out")
    p.add_argument("--plot-prefix", default=None, help="default: the --out file's stem")
    p.add_argument("--title", default="")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the launch commands only")
    p.add_argument("--merge", nargs="+", type=Path, metavar="STUDY_JSON",
                   help="combine earlier studies (e.g. one per link) into --out, redo tables/plots")
    return p


def spec_from_args(args) -> StudySpec:
    return StudySpec(workers=args.workers, kinds=args.kinds, comms=args.comm, launcher=args.launcher,
                     links=args.link or ["1gbit"], delay=args.delay, hosts=args.hosts,
                     hostfile=args.hostfile, controller=args.controller,
                     weak_sentences=args.weak_sentences, strong_sentences=args.strong_sentences,
                     src_len=args.src_len, tgt_len=args.tgt_len, vocab_size=args.vocab_size,
                     preset=args.preset, overrides=args.overrides, steps=args.steps,
                     warmup=args.warmup, block=args.block, threads=args.threads,
                     estimator=args.estimator,
                     timeout=args.timeout)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.merge:
        doc = merge_studies([json.loads(p.read_text()) for p in args.merge])
        doc["merged_from"] = [str(p) for p in args.merge]
        return _finish(args, doc, args.title or "merged study")
    spec = spec_from_args(args)
    spec.validate()
    if args.dry_run:
        work = args.work_dir or Path("scaling-work")
        for comm in spec.comms:
            for kind in spec.kinds:
                for n in spec.workers:
                    per = spec.weak_sentences if kind == "weak" else strong_split(spec.strong_sentences, n)
                    cmd = worker_command(spec, comm, per, work / f"{comm}-{kind}-n{n}.json")
                    if spec.launcher != "emulated":
                        cmd = launch_command(spec, n, cmd)
                    print(shlex.join(cmd))
        return 0
    if args.out.exists() and not args.overwrite:
        raise SystemExit(f"{args.out} exists: pass --overwrite to replace it")
    try:
        with interrupt_on_signals():
            doc = run_study(spec, args.work_dir)
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc}); ranks stopped, namespaces removed, nothing written",
              file=sys.stderr)
        return 130
    return _finish(args, doc, args.title or f"{spec.launcher} {','.join(spec.link_labels())}")


def _finish(args, doc, title: str) -> int:
    """Print the table, write the plots and the JSON (refusing to overwrite without --overwrite)."""
    if args.out.exists() and not args.overwrite:
        raise SystemExit(f"{args.out} exists: pass --overwrite to replace it")
    from experiments.scaling.cluster.plots import plot_study  # noqa: PLC0415

    doc["title"] = title
    doc["provenance"] = common.provenance()
    print(doc["table_markdown"])
    write_json_new(args.out, doc, overwrite=args.overwrite)  # measured data first, then plots
    prefix = args.plot_prefix or args.out.stem
    doc["plots"] = [str(p) for p in plot_study(doc["rows"], args.plots_dir or args.out.parent,
                                               title, prefix)]
    write_json_new(args.out, doc, overwrite=True)
    print(f"wrote {args.out} and {', '.join(doc['plots']) or 'no plots (no N=1 baseline)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
