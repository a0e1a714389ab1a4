"""The `python -m experiments cluster` tool: an emulated multi-host cluster on one machine (network
namespaces + bridge + tc), run as root.

    python -m experiments cluster check                       # root? iproute2? which qdiscs (tbf, netem)?
    python -m experiments cluster bench --hosts 2 --rate 100mbit --rate 1gbit --rate 10gbit \
        [--delay 0.5ms] [--megabytes 16] [--out results/linkbench.json]
    python -m experiments cluster run --hosts 2 --rate 1gbit -- python my_horovod_script.py ...
    python -m experiments cluster cleanup                     # remove leftovers (tfnmtc-* namespaces)

``run`` starts one Horovod/Gloo rank per namespace (``--slots`` per host) with Horovod's
rendezvous server in host 0's namespace; the namespaces are removed afterwards, also on
Ctrl-C/SIGTERM. Traffic stays inside the namespaces (10.213.x.0/24 exists only on the bridge).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from experiments.lib.launcher import worker_env
from experiments.scaling.cluster.emulated_ranks import launch_emulated
from experiments.scaling.cluster.netns import (ROOT_PREFIX, EmulatedCluster, LinkSpec, qdisc_available,
                                  remove_namespaces, support_problem)
from experiments.scaling.cluster.signals import interrupt_on_signals


def cmd_check(args) -> int:
    problem = support_problem()
    print(f"namespaces: {'OK' if problem is None else 'NO (' + problem + ')'}")
    if problem is None:
        for kind in ("tbf", "netem"):
            print(f"qdisc {kind}: {'available' if qdisc_available(kind) else 'MISSING'}")
    return 0 if problem is None else 1


def bench(hosts: int, rate: str, delay: str = "0", megabytes: float = 16, repeats: int = 5,
          tag: str = "main", timeout: float = 600) -> dict:
    """One link bench (:mod:`experiments.scaling.cluster.linkbench`) on ``hosts`` emulated hosts
    at ``rate``: its record, the link's description and the bytes each host sent."""
    with tempfile.TemporaryDirectory(prefix="tfnmt-linkbench-") as tmp:
        with EmulatedCluster(hosts, LinkSpec(rate, delay), tag=tag) as cluster:
            before = cluster.link_bytes()
            out = Path(tmp) / f"{rate}.json"
            launch_emulated(cluster, [sys.executable, "-m", "experiments.scaling.cluster.linkbench",
                                      "--megabytes", str(megabytes), "--repeats",
                                      str(repeats), "--out", str(out)],
                            Path(tmp) / "logs" / rate, env=worker_env(), timeout=timeout)
            after = cluster.link_bytes()
            r = json.loads(out.read_text())
            r.update({"link": cluster.describe(),
                      "link_bytes_sent": {h: after[h] - before[h] for h in after}})
    return r


def cmd_bench(args) -> int:
    results = [bench(args.hosts, rate, args.delay, args.megabytes, args.repeats, args.tag,
                     args.timeout) for rate in args.rate]
    print(f"allreduce of {args.megabytes} MB float32 over {args.hosts} emulated hosts")
    print("| link rate | delay | median time | bus bandwidth | share of link rate | bytes sent per host |")
    print("|---|---|---|---|---|---|")
    for r in results:
        share = r["bus_bandwidth_bits"] / r["link"]["rate_bits"]
        sent = sorted(r["link_bytes_sent"].values())
        print(f"| {r['link']['rate']} | {r['link']['delay']} | {1e3 * r['median_s']:.1f} ms | "
              f"{r['bus_bandwidth_bits'] / 1e6:.0f} Mbit/s | {100 * share:.0f}% | "
              f"{sent[0] / 1e6:.1f}–{sent[-1] / 1e6:.1f} MB |")
    if args.out:
        out = Path(args.out)
        if out.exists() and not args.overwrite:
            raise SystemExit(f"{out} exists: pass --overwrite")
        tmp_out = out.with_name(out.name + ".tmp")
        tmp_out.write_text(json.dumps({"hosts": args.hosts, "megabytes": args.megabytes,
                                       "results": results}, indent=2))
        tmp_out.replace(out)
    return 0


def cmd_run(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise SystemExit("give the command after --")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="tfnmt-cluster-"))
    with EmulatedCluster(args.hosts, LinkSpec(args.rate, args.delay), tag=args.tag) as cluster:
        print(f"cluster: {json.dumps(cluster.describe())}; logs in {log_dir}")
        results = launch_emulated(cluster, command, log_dir, slots_per_host=args.slots,
                                  env=worker_env(threads=args.threads), timeout=args.timeout)
        print(json.dumps({"link_bytes_sent": cluster.link_bytes(),
                          "ranks": [{"rank": r.rank, "host": r.host, "rc": r.returncode,
                                     "log": str(r.log)} for r in results]}, indent=2))
    return 0


def cmd_cleanup(args) -> int:
    removed = remove_namespaces(ROOT_PREFIX)
    print(f"removed {len(removed)} namespace(s): {' '.join(removed) or '-'}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check").set_defaults(fn=cmd_check)
    sub.add_parser("cleanup").set_defaults(fn=cmd_cleanup)
    for name, fn in (("bench", cmd_bench), ("run", cmd_run)):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--hosts", type=int, default=2)
        p.add_argument("--delay", default="0", help="one-way delay per direction (needs netem)")
        p.add_argument("--tag", default="main", help="namespace name tag (tfnmtc-<tag>-*)")
        p.add_argument("--timeout", type=float, default=600)
        if name == "bench":
            p.add_argument("--rate", action="append", required=True)
            p.add_argument("--megabytes", type=float, default=16)
            p.add_argument("--repeats", type=int, default=5)
            p.add_argument("--out")
            p.add_argument("--overwrite", action="store_true")
        else:
            p.add_argument("--rate", default="1gbit")
            p.add_argument("--slots", type=int, default=1)
            p.add_argument("--threads", type=int, default=1)
            p.add_argument("--log-dir")
            p.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        with interrupt_on_signals():
            return args.fn(args)
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc}); ranks stopped and namespaces removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
