"""Transfer-learning experiment: a parent trained on one part of the corpus initialises a child
trained on another; embedding strategies and warm-up/no-warm-up compared by steps to a BLEU
threshold on the child's dev set. Writes ``experiments/transfer/results/transfer.json`` and prints a table.

The parts are chosen by the ``source`` column of the prepared corpus's ``*.meta.tsv`` (default:
parent = LibreOffice help + UI + GCC messages, child = Ding dictionary sentences; the dev/test
splits are Ding sentences). Each part gets its own SentencePiece vocabulary, so the parent's and
the child's vocabularies differ. Every training run is ``tf-nmt train`` in a subprocess; the dev
BLEU of every kept checkpoint comes from :func:`experiments.lib.curves.bleu_curve`.

    python -m experiments transfer --preset quickstart \\
        --parent-steps 6000 --child-steps 3000 --eval-every 250 --bleu-threshold 10
    python -m experiments transfer --tiny --output /tmp/transfer-tiny.json

(``python -m experiments transfer`` takes the same arguments.) ``--tiny`` is a minutes-long
smoke setting (1-layer d_model 32 model, a few dozen steps): it checks the pipeline end to end,
its numbers mean nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tf_nmt.data.weighting import split_sources
from experiments.lib import common
from experiments.lib.curves import bleu_curve, first_reaching, trained_steps

TINY_SETTINGS = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32",
                 "model.num_heads=2", "model.ff_dim=64", "model.dropout=0.0",
                 "data.batch_tokens=1024", "train.warmup_steps=20", "train.peak_lr=0.003",
                 "train.mixed_precision=false", "decode.beam_size=1"]


def write_part(data_dir: Path, out: Path, sources: Sequence[str], max_pairs: int) -> Dict[str, int]:
    """A prepared-data dir with the train pairs of ``sources`` and the full dev/test splits."""
    corpus, target = Path(data_dir) / "corpus", Path(out) / "corpus"
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "dev", "test"):
        en = (corpus / f"{split}.en").read_text(encoding="utf-8").splitlines()
        de = (corpus / f"{split}.de").read_text(encoding="utf-8").splitlines()
        meta = split_sources(data_dir, split)
        if not len(en) == len(de) == len(meta):
            raise SystemExit(f"{corpus}: {split} files have different lengths")
        keep = [i for i, src in enumerate(meta) if split != "train" or src in sources]
        if split == "train" and max_pairs:
            keep = keep[:max_pairs]
        if not keep:
            raise SystemExit(f"no {split} pairs from sources {list(sources)} in {corpus}")
        (target / f"{split}.en").write_text("".join(en[i] + "\n" for i in keep), encoding="utf-8")
        (target / f"{split}.de").write_text("".join(de[i] + "\n" for i in keep), encoding="utf-8")
        counts[split] = len(keep)
    return counts


def check_trained(run_dir: Path, steps: int) -> None:
    """Refuse a reused (``--resume``) run that was trained for another number of steps: the
    results would record settings that the runs did not have."""
    trained = trained_steps(run_dir)
    if trained != steps:
        raise SystemExit(f"{run_dir} was trained {trained} steps, not {steps}: use the step counts "
                         "it was started with, or a fresh --work-dir")


def steps_to(curve: List[Dict[str, Any]], threshold: float) -> Optional[int]:
    """The first step whose BLEU reaches ``threshold`` (None: never)."""
    hit = first_reaching(curve, threshold)
    return None if hit is None else hit["step"]


def child_variants(strategies: Sequence[str]) -> List[Tuple[str, Optional[str], bool]]:
    """(name, embedding strategy or None for scratch, warm-up) of every child run."""
    variants: List[Tuple[str, Optional[str], bool]] = [("scratch", None, True)]
    for strategy in strategies:
        variants += [(strategy, strategy, True), (f"{strategy}+no-warmup", strategy, False)]
    return variants


def child_args(parent_run: Path, strategy: Optional[str], warmup: bool) -> List[str]:
    """The ``tf-nmt train`` options that initialise a child from the parent."""
    if strategy is None:
        return []
    return ["--init-from", str(parent_run), "--embeddings", strategy] + ([] if warmup else ["--no-warmup"])


def apply_tiny(args: argparse.Namespace) -> List[str]:
    """Shrink ``args`` to the smoke setting (in place); the overrides of every run."""
    args.vocab_size, args.max_train_pairs = min(args.vocab_size, 1000), args.max_train_pairs or 3000
    args.parent_steps, args.child_steps = min(args.parent_steps, 60), min(args.child_steps, 40)
    args.eval_every, args.dev_limit = min(args.eval_every, 20), min(args.dev_limit, 50)
    args.bleu_threshold = min(args.bleu_threshold, 0.5)
    return TINY_SETTINGS + list(args.set)


def table(children: List[Dict[str, Any]], threshold: float, child_steps: int) -> str:
    """Steps to the threshold, best and final BLEU of every child."""
    lines = [f"steps to dev BLEU >= {threshold} (child trained {child_steps} steps)",
             f"{'child':<26} {'rows from parent':>16} {'steps':>7} {'best BLEU':>9} {'final BLEU':>10}"]
    for c in children:
        rows = f"{c['mapped_embedding_rows']}/{c['child_vocab_size']}" if c["embeddings"] else "-"
        steps = c["steps_to_threshold"] if c["steps_to_threshold"] is not None else "never"
        lines.append(f"{c['name']:<26} {rows:>16} {steps!s:>7} {c['best_bleu']:>9.2f} "
                     f"{c['final_bleu']:>10.2f}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments transfer``)."""
    ap = argparse.ArgumentParser(prog="python -m experiments transfer", description=__doc__.split("\n\n")[0])
    common.add_work_dir_args(ap, "transfer", common.results_path(__file__, "transfer.json"))
    ap.add_argument("--parent-sources", default="lo_help,lo_ui,gcc")
    ap.add_argument("--child-sources", default="ding")
    ap.add_argument("--vocab-size", type=int, default=8000, help="per part (own vocabulary each)")
    ap.add_argument("--max-train-pairs", type=int, default=0, help="cap per part (0 = all)")
    ap.add_argument("--preset", default="quickstart")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="config override for every run (parent and children)")
    ap.add_argument("--parent-steps", type=int, default=6000)
    ap.add_argument("--child-steps", type=int, default=3000)
    ap.add_argument("--eval-every", type=int, default=250, help="checkpoint/BLEU interval")
    ap.add_argument("--dev-limit", type=int, default=500, help="dev sentences scored per point")
    ap.add_argument("--bleu-threshold", type=float, default=10.0)
    ap.add_argument("--strategies", default="token-match,exclude,random,frequency")
    ap.add_argument("--tiny", action="store_true", help="smoke setting (see the module doc)")
    ap.add_argument("--resume", action="store_true",
                    help="keep --work-dir: finished runs and scores are reused, unfinished ones resume")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Train the parent and every child, score their dev curves, write the results."""
    args = build_parser().parse_args(argv)
    overrides = apply_tiny(args) if args.tiny else list(args.set)
    common.refuse_existing([args.output] if args.resume else [args.output, args.work_dir],
                           args.overwrite)
    if args.work_dir.exists() and not args.resume:
        shutil.rmtree(args.work_dir)

    work = args.work_dir
    parent_data, child_data = work / "parent-data", work / "child-data"
    parent_counts = write_part(args.data_dir, parent_data, args.parent_sources.split(","), args.max_train_pairs)
    child_counts = write_part(args.data_dir, child_data, args.child_sources.split(","), args.max_train_pairs)
    cycle = args.eval_every
    shared = ["--preset", args.preset, *common.set_args(
        [*overrides, f"data.vocab_size={args.vocab_size}", f"train.steps_per_cycle={cycle}",
         f"train.keep_checkpoints={args.child_steps // cycle + 1}"])]
    start = time.perf_counter()
    parent_run = work / "parent"
    parent_reused = trained_steps(parent_run) == args.parent_steps  # --resume
    common.run_tf_nmt("train", "--run-dir", str(parent_run), "--data-dir", str(parent_data),
                      *shared, "--set", f"train.train_steps={args.parent_steps}")
    parent_s = time.perf_counter() - start
    check_trained(parent_run, args.parent_steps)

    children = []
    for name, strategy, warmup in child_variants(args.strategies.split(",")):
        run = work / f"child-{name}"
        reused = trained_steps(run) == args.child_steps  # --resume: trained by an earlier invocation
        t0 = time.perf_counter()
        common.run_tf_nmt("train", "--run-dir", str(run), "--data-dir", str(child_data), *shared,
                          "--set", f"train.train_steps={args.child_steps}",
                          *child_args(parent_run, strategy, warmup))
        train_s = time.perf_counter() - t0
        check_trained(run, args.child_steps)
        curve = bleu_curve(run, "dev", data_dir=child_data, limit=args.dev_limit)
        init = json.loads((run / "init_from.json").read_text()) if strategy else None
        children.append({"name": name, "embeddings": strategy, "warmup": warmup,
                         "steps_to_threshold": steps_to(curve, args.bleu_threshold),
                         "final_bleu": curve[-1]["bleu"] if curve else None,
                         "best_bleu": max((p["bleu"] for p in curve), default=None),
                         "curve": curve, "train_seconds": None if reused else train_s,
                         "reused_from_earlier_invocation": reused,
                         "mapped_embedding_rows": init and init["mapped_rows"],
                         "child_vocab_size": init and init["child_vocab_size"]})

    payload = {
        "experiment": "transfer learning as initialisation (issue 8)",
        "tiny_smoke_setting": bool(args.tiny),
        "settings": {"preset": args.preset, "overrides": overrides, "vocab_size": args.vocab_size,
                     "parent_sources": args.parent_sources, "child_sources": args.child_sources,
                     "parent_steps": args.parent_steps, "child_steps": args.child_steps,
                     "eval_every": args.eval_every, "dev_limit": args.dev_limit,
                     "bleu_threshold": args.bleu_threshold,
                     "frequency_rank": "SentencePiece piece scores (unigram log-probabilities)"},
        "pairs": {"parent": parent_counts, "child": child_counts},
        "parent_train_seconds": None if parent_reused else parent_s,
        "children": children,
        # this invocation's time: after a --resume that reused runs it is not the study's cost
        # (the runs' own train_seconds are, where this invocation trained them)
        "invocation_seconds": time.perf_counter() - start,
    }
    common.write_result(args.output, payload, overwrite=True)
    print("\n" + table(children, args.bleu_threshold, args.child_steps))
    print(f"wrote {args.output}")
    return 0
