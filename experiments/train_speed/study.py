"""Training speed on this CPU: steady-state target tokens/s of training variants, side by side
with OpenNMT-tf on the same model and batch (issue 17).

Each variant is one real training process (``tf-nmt train``, under ``horovodrun`` for the 2x1
variant; ``onmt-main train`` for the peer) of ``--warmup + --steps`` steps on the prepared corpus.
Its speed is read from its own progress log over the steps after the warm-up (tracing, XLA
compilation, the first buckets), as target tokens/s and seconds/step; the CPU time the process
used over its wall time says how many of the cores it kept busy, start-up included, and, from
tf-nmt's progress log, over the timed steps alone (one-process variants). The
variants run in rotated order in every round, so this noisy machine's drift falls on all of
them alike; each variant's figure is its median over rounds and its ratio to the baseline (and
to the peer) is the median of the per-round ratios.

Variants (``--variants``; names in :data:`VARIANTS`): ``fp32`` and ``bf16`` (mixed bfloat16)
with tf-nmt's defaults; ``fp32-tfloss`` with the loss composed of TensorFlow ops instead of the
fused C++ kernel (``train.loss_kernel=tf``); ``fp32-tfdrop`` with Keras's dropout instead of the
seeded C++ op (``train.dropout_kernel=tf``); ``fp32-tfnorm`` and ``bf16-tfnorm`` with Keras's
layer norm instead of the fused C++ op (``train.norm_kernel=tf``); ``fp32-tf`` with all three
TensorFlow kernels; each with XLA (``-xla``), ``-geometric`` (the geometric length
buckets, ``data.length_bucket_width=0``) and ``-tcmalloc`` (``TF_NMT_ALLOCATOR=tcmalloc``,
where installed); ``fp32-ema`` and ``bf16-ema`` with the weight EMA the quickstart trains with
(``train.ema_decay=0.999``, reported against the same variant without it); ``bf16`` with
TensorFlow's threads set explicitly (``-intra2``)
and as 2 processes x 1 thread under ``horovodrun`` (``-hvd2x1``, the same global batch); ``-spe5``
with 5 steps per call of the train function (``train.steps_per_execution=5``); the
peer ``onmt-fp32`` (its CPU default) and ``onmt-bf16`` (its Keras policy forced to
mixed_bfloat16), from a side virtualenv (``experiments/train_speed/install_opennmt.sh``), and ``onmt-fp32``
with tcmalloc preloaded (``onmt-fp32-tcmalloc``, where installed). ``--variant`` adds variants
of config overrides and environment variables. The batch's padding is measured once: the
fraction of padded positions that are real tokens in our token buckets.

    python -m experiments train-speed                       # every variant, 3 rounds (~2.5 hours)
    python -m experiments train-speed --variants fp32,bf16 --rounds 1 --warmup 5 --steps 10 \\
        --out /tmp/ts.json                              # minutes
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tf_nmt.data.sample import sample_batches
from experiments.lib import common
from tf_nmt.utils import allocator, machine

ONMT_VENV = Path(".venv-onmt")
TCMALLOC = "<tcmalloc>"  # in a variant's env: the installed tcmalloc library
BASELINE, PEER = "fp32", "onmt-fp32"


@dataclass(frozen=True)
class Variant:
    """One way to train the same model on the same batches.

    Args:
        overrides: ``tf-nmt`` config overrides on top of the preset.
        env: environment variables of the process(es).
        processes: 1, or 2 under ``horovodrun`` (each with half the batch: the same global batch).
        peer: run OpenNMT-tf instead (``bf16``: its Keras policy set to mixed_bfloat16).
    """

    overrides: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    processes: int = 1
    peer: Optional[str] = None


FP32, BF16 = "train.mixed_precision=false", "train.mixed_precision=true"
AUTO = "train.mixed_precision=auto"
TCMALLOC_ENV = {allocator.ENV: "tcmalloc"}
VARIANTS: Dict[str, Variant] = {
    "fp32": Variant([FP32]),
    "bf16": Variant([BF16]),
    # the presets' setting (tf_nmt.training.precision.decide): against the faster of fp32/bf16
    "auto": Variant([AUTO]),
    "fp32-xla": Variant([FP32, "train.jit_compile=true"]),
    "bf16-xla": Variant([BF16, "train.jit_compile=true"]),
    "fp32-tfloss": Variant([FP32, "train.loss_kernel=tf"]),
    "fp32-tfdrop": Variant([FP32, "train.dropout_kernel=tf"]),
    "fp32-tfnorm": Variant([FP32, "train.norm_kernel=tf"]),
    "bf16-tfnorm": Variant([BF16, "train.norm_kernel=tf"]),
    "fp32-tf": Variant([FP32, "train.loss_kernel=tf", "train.dropout_kernel=tf",
                        "train.norm_kernel=tf"]),
    "fp32-geometric": Variant([FP32, "data.length_bucket_width=0"]),
    "bf16-geometric": Variant([BF16, "data.length_bucket_width=0"]),
    "fp32-tcmalloc": Variant([FP32], TCMALLOC_ENV),
    "bf16-tcmalloc": Variant([BF16], TCMALLOC_ENV),
    "bf16-intra2": Variant([BF16], {"TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1",
                                    "OMP_NUM_THREADS": "2"}),
    "bf16-hvd2x1": Variant([BF16], processes=2),
    "fp32-spe5": Variant([FP32, "train.steps_per_execution=5"]),
    "bf16-spe5": Variant([BF16, "train.steps_per_execution=5"]),
    # tf-nmt's models on Keras 3 (tf_nmt.compat); each also reported against its twin, which then
    # runs on Keras 2 (pin_keras2_twins)
    "k3-fp32": Variant([FP32], {"TF_NMT_KERAS": "3"}),
    "k3-bf16": Variant([BF16], {"TF_NMT_KERAS": "3"}),
    # the quickstart's weight EMA (train.ema_decay); each also reported against its twin without
    "fp32-ema": Variant([FP32, "train.ema_decay=0.999"]),
    "bf16-ema": Variant([BF16, "train.ema_decay=0.999"]),
    "onmt-fp32": Variant(peer="fp32"),
    "onmt-bf16": Variant(peer="bf16"),
    "onmt-fp32-tcmalloc": Variant(env={"LD_PRELOAD": TCMALLOC}, peer="fp32"),
}
KERAS3_PREFIX = "k3-"  # k3-X: variant X with tf-nmt's models on Keras 3 (summarise: x_keras2)
EMA_SUFFIX = "-ema"  # X-ema: variant X with the weight EMA on (summarise: x_no_ema)


def twin(name: str) -> Tuple[Optional[str], Optional[str]]:
    """(the variant that ``name`` differs from in one setting, the ratio's key): ``k3-X``
    against ``X`` (``x_keras2``), ``X-ema`` against ``X`` (``x_no_ema``); (None, None) else."""
    if name.startswith(KERAS3_PREFIX):
        return name[len(KERAS3_PREFIX):], "x_keras2"
    if name.endswith(EMA_SUFFIX):
        return name[:-len(EMA_SUFFIX)], "x_no_ema"
    return None, None


NEEDS_TCMALLOC = ("fp32-tcmalloc", "bf16-tcmalloc", "onmt-fp32-tcmalloc")


def parse_variant(text: str) -> Tuple[str, Variant]:
    """``NAME:OVERRIDE ... env.KEY=VALUE ... [np=N]`` (``--variant``) as (name, tf-nmt Variant);
    ``np=N`` runs N processes under ``horovodrun``, each with 1/N of the batch."""
    name, sep, settings = text.partition(":")
    if not sep or not name.strip() or not settings.split():
        raise ValueError(f"--variant {text!r}: expected NAME:SETTINGS, e.g. "
                         "'fp32-w1:train.mixed_precision=false data.length_bucket_width=1'")
    overrides: List[str] = []
    env: Dict[str, str] = {}
    processes = 1
    for item in settings.split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--variant {name}: {item!r} is not KEY=VALUE")
        if key.startswith("env."):
            env[key[4:]] = value
        elif key == "np":
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"--variant {name}: np must be a whole number >= 1, got {value!r}")
            processes = int(value)
        else:
            overrides.append(item)
    return name.strip(), Variant(overrides, env, processes)


def variant_env(variant: Variant, base: Mapping[str, str]) -> Dict[str, str]:
    """``base`` with the variant's variables (``<tcmalloc>`` replaced by the library's path)."""
    env = dict(base)
    env.update({k: (allocator.tcmalloc_path() or "") if v == TCMALLOC else v
                for k, v in variant.env.items()})
    return env


def steady_speed(entries: Sequence[Mapping[str, Any]], warmup: int, log_every: int
                 ) -> Dict[str, float]:
    """Target tokens/s and s/step over the logged intervals after step ``warmup``, and, where
    the entries carry the process's CPU time (tf-nmt's progress log), the cores it kept busy
    over those steps alone (``train_cores_busy``: start-up, tracing and warm-up left out)."""
    timed = [e for e in entries if e["step"] > warmup]
    if not timed:
        raise ValueError(f"no progress entry after the {warmup} warm-up steps")
    seconds = sum(e["s_per_step"] * log_every for e in timed)
    tokens = sum(e["tokens_per_s"] * e["s_per_step"] * log_every for e in timed)
    steps = log_every * len(timed)
    speed = {"tgt_tok_per_s": tokens / seconds, "s_per_step": seconds / steps, "timed_steps": steps}
    start = [e for e in entries if e["step"] == warmup]
    if start and all("cpu_s" in e and "elapsed_s" in e for e in (start[-1], timed[-1])):
        wall = timed[-1]["elapsed_s"] - start[-1]["elapsed_s"]
        speed["train_cores_busy"] = (timed[-1]["cpu_s"] - start[-1]["cpu_s"]) / wall
    return speed


def run_timed(cmd: Sequence[str], env: Mapping[str, str], log_path: Path,
              timeout: float) -> Dict[str, float]:
    """Run ``cmd`` to completion; its wall time and the CPU time it and its children used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log_path, "w") as out:
        proc = subprocess.run(list(cmd), env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "cores_busy": cpu / wall}


class Bench:
    """Runs the variants of one invocation; all files under ``work``."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.total = args.warmup + args.steps
        self._onmt_dir: Optional[Path] = None

    def tf_nmt(self, name: str, variant: Variant, round_index: int) -> Dict[str, Any]:
        """One tf-nmt training process (or horovodrun job) of the variant."""
        from experiments.lib import launcher
        from tf_nmt.training.callbacks import PROGRESS_LOG, read_progress_log

        a = self.args
        run_dir = self.work / f"{name}-r{round_index}"
        batch = a.batch_tokens // variant.processes
        overrides = [f"train.train_steps={self.total}", f"train.log_every={a.log_every}",
                     f"train.steps_per_cycle={self.total}", f"data.batch_tokens={batch}",
                     *a.set, *variant.overrides]
        train = ["train", "--run-dir", str(run_dir), "--data-dir", a.data_dir, "--preset",
                 a.preset, *common.set_args(overrides)]
        env = variant_env(variant, os.environ)
        if variant.processes > 1:
            cmd = launcher.horovodrun_command(variant.processes,
                                              [str(common.tf_nmt_executable()), *train])
            env = launcher.worker_env(threads=max(1, (os.cpu_count() or 2) // variant.processes),
                                      base=env)
        else:
            cmd = [*common.tf_nmt_command(), *train]
        usage = run_timed(cmd, env, self.work / f"{name}-r{round_index}.log", a.timeout)
        speed = steady_speed(read_progress_log(run_dir / PROGRESS_LOG), a.warmup, a.log_every)
        if variant.processes > 1:  # the log holds the chief's CPU time only
            speed.pop("train_cores_busy", None)
        return {**speed, **usage}

    def onmt(self, name: str, variant: Variant, round_index: int) -> Dict[str, Any]:
        """One OpenNMT-tf training process of the peer."""
        from experiments.train_speed import onmt_peer

        a = self.args
        if self._onmt_dir is None:
            self._onmt_dir = onmt_peer.prepare(Path(a.data_dir), a.preset, self.work / "onmt",
                                               Path(a.onmt_venv), a.set)
        model_dir = self.work / f"{name}-r{round_index}"
        cmd, env = onmt_peer.train_command(self._onmt_dir, model_dir, Path(a.onmt_venv),
                                           bf16=variant.peer == "bf16", steps=self.total,
                                           batch_tokens=a.batch_tokens, report_every=a.log_every)
        log = self.work / f"{name}-r{round_index}.log"
        usage = run_timed(cmd, variant_env(variant, env), log, a.timeout)
        text = log.read_text(errors="replace")
        entries = onmt_peer.read_log(text)
        return {**steady_speed(entries, a.warmup, a.log_every), **usage,
                **onmt_peer.parameter_count(text)}

    def measure(self, name: str, round_index: int) -> Dict[str, Any]:
        variant = self.args.table[name]
        runner = self.onmt if variant.peer else self.tf_nmt
        return runner(name, variant, round_index)


def padding(data_dir: str, preset_name: str, overrides: Sequence[str], batch_tokens: int,
            batches: int) -> Dict[str, float]:
    """Real tokens per padded position in ``batches`` training batches of our buckets."""
    cfg = common.study_config(preset_name, [f"data.data_dir={data_dir}", *overrides], batch_tokens)
    _, sample = sample_batches(cfg.data, batches, pairs_per_rank=20000)
    counts = [common.batch_tokens(f, l) for f, l in sample]
    total = {k: sum(c[k] for c in counts) for k in counts[0]}
    return {"batches": len(counts),
            "target_real_fraction": total["target_tokens"] / total["target_padded"],
            "source_real_fraction": total["source_tokens"] / total["source_padded"],
            "target_tokens_per_batch": total["target_tokens"] / len(counts)}


def summarise(samples: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """Per variant: medians over rounds, and per-round ratios to the baseline and the peer."""
    out: Dict[str, Dict[str, Any]] = {}
    for name, rounds in samples.items():
        row = {key: statistics.median(r[key] for r in rounds)
               for key in ("tgt_tok_per_s", "s_per_step", "cores_busy")}
        if all("train_cores_busy" in r for r in rounds):
            row["train_cores_busy"] = statistics.median(r["train_cores_busy"] for r in rounds)
        # a variant with a twin (twin()) also against it, round by round
        for ref, label in ((BASELINE, "x_fp32"), (PEER, "x_onmt_fp32"), twin(name)):
            if ref in samples and len(samples[ref]) == len(rounds):
                row[label] = statistics.median(r["tgt_tok_per_s"] / b["tgt_tok_per_s"]
                                               for r, b in zip(rounds, samples[ref]))
        if name == "auto" and all(len(samples.get(v, ())) == len(rounds) for v in ("fp32", "bf16")):
            # against the faster precision of the same round (issue 56: never slower than it)
            row["x_faster_precision"] = statistics.median(
                r["tgt_tok_per_s"] / max(a["tgt_tok_per_s"], b["tgt_tok_per_s"])
                for r, a, b in zip(rounds, samples["fp32"], samples["bf16"]))
        out[name] = {**row, "rounds": rounds}
    return out


def format_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The variants as a Markdown table."""
    lines = ["| variant | target tok/s | s/step | cores busy (process / timed steps) | x fp32 "
             "| x OpenNMT-tf fp32 | x twin (Keras 2 / no EMA) |", "|---|---|---|---|---|---|---|"]
    for name, row in summary.items():
        ratios = [f"{row[k]:.2f}" if k in row else "-"
                  for k in ("x_fp32", "x_onmt_fp32", twin(name)[1])]
        timed = f"{row['train_cores_busy']:.2f}" if "train_cores_busy" in row else "-"
        lines.append(f"| {name} | {row['tgt_tok_per_s']:,.0f} | {row['s_per_step']:.3f} | "
                     f"{row['cores_busy']:.2f} / {timed} | {ratios[0]} | {ratios[1]} | "
                     f"{ratios[2]} |")
    if "x_faster_precision" in summary.get("auto", {}):
        lines.append(f"\nauto against the faster of fp32 and bf16, round by round: "
                     f"{summary['auto']['x_faster_precision']:.2f}x")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments train-speed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="data_cache")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--variants", default=None,
                   help=f"comma-separated, from {', '.join(VARIANTS)} (default: all; "
                        f"{', '.join(NEEDS_TCMALLOC)} only where tcmalloc is installed)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:SETTINGS",
                   help="an extra tf-nmt variant: NAME, a colon, then space-separated config "
                        "overrides and env.KEY=VALUE environment variables, e.g. "
                        "'fp32-w1:train.mixed_precision=false data.length_bucket_width=1'; "
                        "np=N runs N processes under horovodrun with 1/N of the batch each "
                        "(repeatable; measured after --variants, in the same rounds)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    p.add_argument("--warmup", type=int, default=30, help="steps before timing starts")
    p.add_argument("--steps", type=int, default=60, help="timed steps per run")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--batch-tokens", type=int, default=4096, help="global batch (tokens)")
    p.add_argument("--set", action="append", default=[], help="config override for every tf-nmt run")
    p.add_argument("--onmt-venv", default=str(ONMT_VENV))
    p.add_argument("--timeout", type=float, default=1800, help="seconds per training process")
    p.add_argument("--work-dir", default=None, help="keep the runs here (default: a temp dir)")
    p.add_argument("--out", default=str(common.results_path(__file__, "train_speed.json")))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    names = (args.variants.split(",") if args.variants else
             [n for n in VARIANTS if n not in NEEDS_TCMALLOC or allocator.tcmalloc_path()])
    try:
        extra = dict(parse_variant(text) for text in args.variant)
    except ValueError as e:
        p.error(str(e))
    clash = sorted(set(extra) & (set(VARIANTS) | set(names)))
    if clash or len(extra) != len(args.variant):
        p.error(f"--variant names must be new and distinct: {clash or args.variant}")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variant(s) {unknown}: use {', '.join(VARIANTS)}")
    missing = [n for n in names if n in NEEDS_TCMALLOC and allocator.tcmalloc_path() is None]
    if missing:
        p.error(f"{', '.join(missing)}: no tcmalloc library (apt install libtcmalloc-minimal4); "
                "leave the variant out")
    if any(VARIANTS[n].peer for n in names):
        from experiments.train_speed import onmt_peer

        if not (Path(args.onmt_venv) / "bin" / "onmt-main").is_file():
            p.error(f"the OpenNMT-tf variants need {args.onmt_venv}/bin/onmt-main: run "
                    "experiments/train_speed/install_opennmt.sh, or leave onmt-* out of --variants")
        found = onmt_peer.mismatches(common.study_config(args.preset, args.set, args.batch_tokens))
        if found:
            p.error("the OpenNMT-tf variants cannot mirror " + "; ".join(found)
                    + ": leave onmt-* out of --variants")
    for name in ("rounds", "steps", "log_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup % args.log_every or args.steps % args.log_every:
        p.error("--warmup and --steps must be multiples of --log-every")
    args.variants = names + list(extra)
    args.table = pin_keras2_twins({**{n: VARIANTS[n] for n in names}, **extra})
    return args


def pin_keras2_twins(table: Mapping[str, Variant]) -> Dict[str, Variant]:
    """``table`` with the twin ``X`` of every ``k3-X`` in it run on Keras 2 (``TF_NMT_KERAS=2``
    unless its own env sets one): tf-nmt's default is Keras 3, so an unpinned ``X`` would be
    Keras 3 too and ``x_keras2`` would compare Keras 3 with itself. The results file's
    ``variant_settings`` records the pin."""
    pinned = dict(table)
    for name in table:
        ref, label = twin(name)
        if label == "x_keras2" and ref in pinned and "TF_NMT_KERAS" not in pinned[ref].env:
            twin_variant = pinned[ref]
            pinned[ref] = Variant(twin_variant.overrides, {**twin_variant.env, "TF_NMT_KERAS": "2"},
                                  twin_variant.processes, twin_variant.peer)
    return pinned


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    common.refuse_existing([out], args.overwrite)
    with tempfile.TemporaryDirectory(prefix="train-speed-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        bench = Bench(args, work)
        load_before = [round(v, 2) for v in os.getloadavg()]
        samples: Dict[str, List[Dict[str, Any]]] = {n: [] for n in args.variants}
        for r in range(args.rounds):
            order = args.variants[r % len(args.variants):] + args.variants[:r % len(args.variants)]
            for name in order:
                result = bench.measure(name, r)
                samples[name].append(result)
                print(f"round {r + 1}/{args.rounds} {name}: {result['tgt_tok_per_s']:,.0f} tgt "
                      f"tok/s, {result['s_per_step']:.3f} s/step, {result['cores_busy']:.2f} cores",
                      flush=True)
        summary = summarise(samples)
        result = {"what": "steady-state training speed, variants alternating in one invocation",
                  "command": common.command_line("train-speed", argv),
                  "machine": machine.describe(load=True, load_before=load_before),
                  "settings": {k: v for k, v in vars(args).items()
                               if k not in ("overwrite", "table")},
                  "variant_settings": {n: {"overrides": list(v.overrides), "env": dict(v.env),
                                           "processes": v.processes, "peer": v.peer}
                                       for n, v in args.table.items()},
                  "padding": padding(args.data_dir, args.preset, args.set, args.batch_tokens, 50),
                  "variants": summary}
    print(format_table(summary))
    common.write_result(out, result, overwrite=args.overwrite)
    print(f"wrote {out}")
    return 0
