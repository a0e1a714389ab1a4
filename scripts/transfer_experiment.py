"""Transfer-learning experiment: a parent trained on one part of the corpus initialises a child
trained on another; embedding strategies and warm-up/no-warm-up compared by steps to a BLEU
threshold on the child's dev set. Writes ``results/transfer.json`` and prints a table.

The parts are chosen by the ``source`` column of the prepared corpus's ``*.meta.tsv`` (default:
parent = LibreOffice help + UI + GCC messages, child = Ding dictionary sentences; the dev/test
splits are Ding sentences). Each part gets its own SentencePiece vocabulary, so the parent's and
the child's vocabularies differ. Every run goes through the ``tf-nmt`` CLI in a subprocess.

    .venv/bin/python scripts/transfer_experiment.py --preset quickstart \\
        --parent-steps 6000 --child-steps 3000 --eval-every 250 --bleu-threshold 10
    .venv/bin/python scripts/transfer_experiment.py --tiny --output /tmp/transfer-tiny.json

``--tiny`` is a minutes-long smoke setting (1-layer d_model 32 model, a few dozen steps): it
checks the pipeline end to end, its numbers mean nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TINY_SETTINGS = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32",
                 "model.num_heads=2", "model.ff_dim=64", "model.dropout=0.0",
                 "data.batch_tokens=1024", "train.warmup_steps=20", "train.peak_lr=0.003",
                 "train.mixed_precision=false", "decode.beam_size=1"]


def write_part(data_dir: Path, out: Path, sources: Sequence[str], max_pairs: int) -> Dict[str, int]:
    """A prepared-data dir with the train pairs of ``sources`` and the full dev/test splits."""
    corpus, target = data_dir / "corpus", out / "corpus"
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "dev", "test"):
        en = (corpus / f"{split}.en").read_text(encoding="utf-8").splitlines()
        de = (corpus / f"{split}.de").read_text(encoding="utf-8").splitlines()
        meta = [line.split("\t", 1)[0] for line in
                (corpus / f"{split}.meta.tsv").read_text(encoding="utf-8").splitlines()]
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


def tf_nmt(*args: str) -> None:
    cmd = [sys.executable, "-m", "tf_nmt", *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def sets(values: Sequence[str]) -> List[str]:
    return [item for value in values for item in ("--set", value)]


def dev_bleu_curve(run_dir: Path, data_dir: Path, limit: int) -> List[Dict[str, float]]:
    """Dev BLEU of every kept checkpoint of ``run_dir`` (``tf-nmt evaluate`` per checkpoint)."""
    from tf_nmt.training.checkpoints import list_checkpoints

    curve = []
    for prefix in list_checkpoints(run_dir / "checkpoints"):
        step = int(prefix.rsplit("-", 1)[1])
        report = run_dir / f"dev-{step}.json"
        if not report.exists():  # a resumed experiment keeps the scores it already has
            tf_nmt("evaluate", "--run-dir", str(run_dir), "--checkpoint", prefix, "--split", "dev",
                   "--data-dir", str(data_dir), "--limit", str(limit), "--output-json", str(report))
        curve.append({"step": step, "bleu": json.loads(report.read_text())["bleu"]})
    return sorted(curve, key=lambda point: point["step"])


def trained_steps(run_dir: Path) -> int:
    """The step of ``run_dir``'s newest checkpoint (0 when it has none)."""
    from tf_nmt.training.checkpoints import list_checkpoints

    prefixes = list_checkpoints(run_dir / "checkpoints")
    return int(prefixes[-1].rsplit("-", 1)[1]) if prefixes else 0


def check_trained(run_dir: Path, steps: int) -> None:
    """Refuse a reused (``--resume``) run that was trained for another number of steps: the
    results would record settings that the runs did not have."""
    trained = trained_steps(run_dir)
    if trained != steps:
        raise SystemExit(f"{run_dir} was trained {trained} steps, not {steps}: use the step counts "
                         "it was started with, or a fresh --work-dir")


def steps_to(curve: List[Dict[str, float]], threshold: float) -> Optional[int]:
    return next((p["step"] for p in curve if p["bleu"] >= threshold), None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data_cache")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "transfer")
    ap.add_argument("--output", type=Path, default=ROOT / "results" / "transfer.json")
    ap.add_argument("--overwrite", action="store_true", help="replace --output and --work-dir")
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
    args = ap.parse_args(argv)
    overrides = list(args.set)
    if args.tiny:
        overrides = TINY_SETTINGS + overrides
        args.vocab_size, args.max_train_pairs = min(args.vocab_size, 1000), args.max_train_pairs or 3000
        args.parent_steps, args.child_steps = min(args.parent_steps, 60), min(args.child_steps, 40)
        args.eval_every, args.dev_limit = min(args.eval_every, 20), min(args.dev_limit, 50)
        args.bleu_threshold = min(args.bleu_threshold, 0.5)
    for path in (args.output,) if args.resume else (args.output, args.work_dir):
        if path.exists() and not args.overwrite:
            raise SystemExit(f"{path} exists; pass --overwrite to replace it")
    if args.work_dir.exists() and not args.resume:
        shutil.rmtree(args.work_dir)

    work = args.work_dir
    parent_data, child_data = work / "parent-data", work / "child-data"
    parent_counts = write_part(args.data_dir, parent_data, args.parent_sources.split(","), args.max_train_pairs)
    child_counts = write_part(args.data_dir, child_data, args.child_sources.split(","), args.max_train_pairs)
    cycle = args.eval_every
    keep = args.child_steps // cycle + 1
    common = ["--preset", args.preset, *sets(overrides),
              *sets([f"data.vocab_size={args.vocab_size}", f"train.steps_per_cycle={cycle}",
                     f"train.keep_checkpoints={keep}"])]
    start = time.perf_counter()
    parent_run = work / "parent"
    tf_nmt("train", "--run-dir", str(parent_run), "--data-dir", str(parent_data), *common,
           "--set", f"train.train_steps={args.parent_steps}")
    check_trained(parent_run, args.parent_steps)

    variants = [("scratch", None, True)]
    for strategy in args.strategies.split(","):
        variants += [(f"{strategy}", strategy, True), (f"{strategy}+no-warmup", strategy, False)]
    children = []
    for name, strategy, warmup in variants:
        run = work / f"child-{name}"
        extra = [] if strategy is None else ["--init-from", str(parent_run), "--embeddings", strategy]
        if strategy is not None and not warmup:
            extra.append("--no-warmup")
        reused = trained_steps(run) == args.child_steps  # --resume: trained by an earlier invocation
        t0 = time.perf_counter()
        tf_nmt("train", "--run-dir", str(run), "--data-dir", str(child_data), *common,
               "--set", f"train.train_steps={args.child_steps}", *extra)
        train_s = time.perf_counter() - t0
        check_trained(run, args.child_steps)
        curve = dev_bleu_curve(run, child_data, args.dev_limit)
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
        "children": children, "wall_seconds": time.perf_counter() - start,
    }
    from tf_nmt.training.trainer import write_json_atomic

    write_json_atomic(args.output, payload)
    print(f"\nsteps to dev BLEU >= {args.bleu_threshold} (child trained {args.child_steps} steps)")
    print(f"{'child':<26} {'rows from parent':>16} {'steps':>7} {'best BLEU':>9} {'final BLEU':>10}")
    for c in children:
        rows = f"{c['mapped_embedding_rows']}/{c['child_vocab_size']}" if c["embeddings"] else "-"
        steps = c["steps_to_threshold"] if c["steps_to_threshold"] is not None else "never"
        print(f"{c['name']:<26} {rows:>16} {steps!s:>7} {c['best_bleu']:>9.2f} {c['final_bleu']:>10.2f}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
