"""The seeds' scaling figures put to ``tf-nmt plan`` (issue 58, item 3). No training: each
scenario is one :func:`tf_nmt.commands.plan.plan` with the compute per rank given as an
assumption (no Xeon Gold 6148 here to probe), so it runs in seconds.

Published (ISC'19, Transformer with ``sparse_as_dense`` on Xeon Gold 6148 nodes and Intel
Omni-Path 100 Gbit/s): 91% weak-scaling efficiency at 1,200 processes, 65% strong-scaling at 400,
and a WMT14 Transformer's time to solution from about a month on one node to about 6 hours on 200.

Assumptions (each an argument): transformer-big with a 32k shared vocabulary; 4 ranks per node
(the seeds ran 2-4); ``--tokens-per-rank`` tokens per rank and step; a node sustains
``--node-tflops`` (fp32) on the step, so one rank's compute is ``6 * parameters * tokens /
(node_tflops / ranks_per_node)``; Horovod's defaults (1 ms cycle); ``--overlap`` of backward
with the exchange.
Strong scaling keeps the global batch of one node (4 ranks) and divides it over N.

    python -m experiments.planning.seeds [--overwrite]
"""
from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common

RESULTS = common.results_path(__file__, "seeds.json")
PUBLISHED = {"weak_efficiency_1200": 0.91, "strong_efficiency_400": 0.65,
             "speedup_200_nodes": 30 * 24 / 6.0}  # "about a month" -> "about 6 hours"


def scenario(name: str, sets: Sequence[str], network: str, nodes: Sequence[int], args) -> Dict[str, Any]:
    """One plan: its rows and what it assumed."""
    from tf_nmt.commands.plan import plan
    from tf_nmt.commands.train import build_config
    from tf_nmt.planning.probe import count_gradients
    from tf_nmt.training.trainer import build_model_for_training

    base = ["data.vocab_size=32000", f"data.batch_tokens={args.tokens_per_rank}", *sets]
    cfg = build_config(args.preset, None, base)
    params = count_gradients(build_model_for_training(cfg, 32000, policy="float32"),
                             32000).parameters
    compute_s = 6.0 * params * args.tokens_per_rank / (args.node_tflops * 1e12 / args.ranks_per_node)
    with tempfile.TemporaryDirectory() as tmp:
        result = plan(args.preset, base, nodes, args.ranks_per_node, network,
                      out=Path(tmp) / "plan", compute_seconds=compute_s, overlap=args.overlap,
                      cycle_ms=args.cycle_ms, quiet=True, cores_per_node=args.cores_per_node,
                      cpu_ns={"gamma": args.gamma_ns, "copy": args.copy_ns,
                              "graddrop": args.graddrop_ns})
    return {"name": name, "sets": base, "network": network, "parameters": params,
            "compute_s": compute_s, "rows": result["rows"], "step_bytes": result["step_bytes"]}


def at(rows: List[Dict[str, Any]], ranks: int) -> Dict[str, Any]:
    return next(r for r in rows if r["ranks"] == ranks)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.planning.seeds", description=__doc__)
    p.add_argument("--preset", default="transformer-big")
    p.add_argument("--ranks-per-node", type=int, default=4)
    p.add_argument("--tokens-per-rank", type=int, default=5000)
    p.add_argument("--node-tflops", type=float, default=1.3,
                   help="sustained fp32 TFLOP/s of one Xeon Gold 6148 node (2 x 20 cores) on the step")
    p.add_argument("--overlap", type=float, default=0.5)
    p.add_argument("--cycle-ms", type=float, default=1.0,
                   help="HOROVOD_CYCLE_TIME of the seeds' runs (Horovod's default; tf-nmt's is 10)")
    p.add_argument("--cores-per-node", type=int, default=40, help="2 x 20 cores")
    # the exchange's CPU work on the seeds' nodes was not published: off by default (the
    # alpha-beta model alone, as these figures were first compared); README says what it moves
    p.add_argument("--gamma-ns", type=float, default=0.0, help="ns per byte of the reduction")
    p.add_argument("--copy-ns", type=float, default=0.0, help="ns per byte of a fusion copy")
    p.add_argument("--graddrop-ns", type=float, default=0.0, help="ns per entry of GradDrop")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    common.refuse_existing([args.out], args.overwrite)
    r = args.ranks_per_node
    nodes = [1, 2, 4, 8, 16, 32, 64, 100, 128, 200, 256, 1200 // r]
    grid = [("sparse_as_dense, Omni-Path 100", [], "omnipath100")]
    for net in ("omnipath100", "25gbit", "10gbit"):
        grid.append((f"graddrop 1%, {net}", ["train.comm=graddrop", "train.drop_ratio=0.99"], net))
    for net in ("25gbit", "10gbit"):
        grid.append((f"sparse_as_dense, {net}", [], net))
    scenarios = [scenario(name, sets, net, nodes, args) for name, sets, net in grid]
    summary = []
    for s in scenarios:
        rows = s["rows"]
        one = at(rows, r)
        summary.append({"scenario": s["name"],
                        "weak_efficiency_1200": at(rows, 1200)["weak_efficiency"],
                        "strong_efficiency_400": at(rows, 400)["strong_efficiency"],
                        "speedup_200_nodes": at(rows, 200 * r)["tokens_per_s"] / one["tokens_per_s"],
                        "step_s_1_node": one["step_s"], "step_s_200_nodes": at(rows, 200 * r)["step_s"]})
    for line in summary:
        print(f"{line['scenario']:<34} weak@1200 {100 * line['weak_efficiency_1200']:5.1f}%  "
              f"strong@400 {100 * line['strong_efficiency_400']:5.1f}%  "
              f"speed-up 1->200 nodes {line['speedup_200_nodes']:6.1f}x")
    command = shlex.join(["python", "-m", "experiments.planning.seeds",
                          *(sys.argv[1:] if argv is None else argv)])
    common.write_result(args.out, {"command": command, "published": PUBLISHED,
                                   "assumptions": {k: v for k, v in vars(args).items()
                                                   if k not in ("out", "overwrite")},
                                   "summary": summary, "scenarios": scenarios}, args.overwrite)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
