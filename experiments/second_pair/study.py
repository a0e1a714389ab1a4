"""A second, non-Latin language pair end to end: English-Russian through the own-corpus path.

The corpus comes from Debian packages (:mod:`experiments.second_pair.build`: LibreOffice help and
UI, GCC, the Debian Handbook, GNOME docs, command-line tools' messages). The study then runs the
user's commands on it, each ``tf-nmt`` in a subprocess:

1. ``tf-nmt prepare-data --src-lang en --tgt-lang ru --train-src/--train-tgt ... --dev-... --test-...
   --vocab-size 8000`` (the own-corpus path: manifest, shared SentencePiece, shards);
2. a check that SentencePiece gives every Russian test sentence back: ``decode(encode(x)) == x``
   (the failures are listed, not hidden: NFKC normalisation rewrites e.g. ``№``);
3. ``tf-nmt train --preset quickstart`` for ``--minutes`` (``train.time_budget_minutes``), every
   checkpoint kept;
4. ``tf-nmt evaluate`` on test for the first and the last checkpoint: sacreBLEU (13a for Russian;
   the report records the tokenizer) and chrF;
5. ``tf-nmt export`` and ``tf-nmt translate --export-dir`` of a few test sentences: Cyrillic text
   out of the SavedModel, detokenised.

It writes ``experiments/second_pair/results/en-ru.json``.

    python -m experiments.second_pair.build                 # the corpus (once, ~30 s)
    python -m experiments second-pair --minutes 15          # the real run (~25 min on 2 cores)
    python -m experiments second-pair --tiny --overwrite    # minutes-long smoke run

``--tiny`` trains a 1-layer d_model 32 model on 3,000 pairs for at most 200 steps, scores 30 test
sentences and writes ``runs/second_pair/en-ru-tiny.json``: it checks the pipeline, its numbers
mean nothing.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common
from experiments.second_pair import build

STUDY = "second-pair"
SRC, TGT = build.SRC_LANG, build.TGT_LANG
UNCAPPED_STEPS = 1_000_000  # a time-budgeted run: the budget ends it
TINY_SETTINGS = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32",
                 "model.num_heads=2", "model.ff_dim=64", "model.dropout=0.0",
                 "data.batch_tokens=1024", "train.warmup_steps=20", "train.peak_lr=0.003",
                 "train.mixed_precision=false", "decode.beam_size=1",
                 "train.train_steps=200", "train.steps_per_cycle=100"]
TINY_PAIRS, TINY_VOCAB, TINY_EVAL = 3000, 1000, 30
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")


def has_cyrillic(text: str) -> bool:
    """Whether ``text`` holds at least one Cyrillic letter."""
    return bool(_CYRILLIC.search(text))


def roundtrip_report(texts: Sequence[str], encode, decode, show: int = 5) -> Dict[str, Any]:
    """How many ``texts`` come back unchanged from ``decode(encode(x))`` (batched callables), and
    the first ``show`` that do not."""
    texts = list(texts)
    back = decode(encode(texts)) if texts else []
    failures = [{"text": t, "decoded": b} for t, b in zip(texts, back) if t != b]
    return {"sentences": len(texts), "exact": len(texts) - len(failures),
            "cyrillic_sentences": sum(map(has_cyrillic, texts)), "failures": failures[:show]}


def tiny_corpus(corpus_dir: Path, out: Path, pairs: int) -> Path:
    """A copy of ``corpus_dir`` whose train split is its first ``pairs`` pairs (for ``--tiny``)."""
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        for lang in (SRC, TGT):
            lines = (corpus_dir / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            keep = lines[:pairs] if split == "train" else lines
            (out / f"{split}.{lang}").write_text("".join(x + "\n" for x in keep), encoding="utf-8")
    return out


def prepare_args(corpus_dir: Path, data_dir: Path, vocab_size: int) -> List[str]:
    """The ``tf-nmt prepare-data`` arguments for the corpus's train/dev/test files."""
    args = ["prepare-data", "--data-dir", str(data_dir), "--src-lang", SRC, "--tgt-lang", TGT]
    for split in ("train", "dev", "test"):
        args += [f"--{split}-src", str(corpus_dir / f"{split}.{SRC}"),
                 f"--{split}-tgt", str(corpus_dir / f"{split}.{TGT}")]
    return args + ["--vocab-size", str(vocab_size)]


def train_settings(minutes: float, tiny: bool, overrides: Sequence[str]) -> List[str]:
    """``--set`` items of the training run: the time budget, every checkpoint kept (the first is
    scored too), the tiny model under ``--tiny``, then the user's overrides (which win)."""
    base = [f"train.train_steps={UNCAPPED_STEPS}", f"train.time_budget_minutes={minutes:g}",
            "train.keep_checkpoints=1000"]
    return base + (TINY_SETTINGS if tiny else []) + list(overrides)


def evaluate(run_dir: Path, checkpoint: str, out: Path, limit: int) -> Dict[str, Any]:
    """``tf-nmt evaluate`` of one checkpoint on test; its JSON report."""
    extra = ["--limit", str(limit)] if limit else []
    common.run_tf_nmt("evaluate", "--run-dir", str(run_dir), "--split", "test",
                      "--checkpoint", checkpoint, "--output-json", str(out), *extra)
    return json.loads(out.read_text(encoding="utf-8"))


def score(report: Dict[str, Any], step: int) -> Dict[str, Any]:
    """The numbers the results file keeps from one evaluate report."""
    keys = ("bleu", "chrf", "signature", "bleu_tokenize", "bleu_tokenize_fallback",
            "copy_baseline_bleu", "sentences")
    return {"step": step, **{k: report[k] for k in keys if k in report}}


def read_lines(path: Path) -> List[str]:
    return path.read_text(encoding="utf-8").splitlines()


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m experiments {STUDY}", description=__doc__.split("\n")[0])
    p.add_argument("--corpus-dir", type=Path, default=build.DEFAULT_OUT,
                   help="train/dev/test.{en,ru} from experiments/second_pair/build.py (built when missing)")
    p.add_argument("--cache", type=Path, default=build.DEFAULT_CACHE, help="the .deb cache build.py uses")
    p.add_argument("--work-dir", type=Path, default=Path("runs") / "second_pair")
    p.add_argument("--output", type=Path, help="default: results/en-ru.json (--tiny: WORK_DIR/en-ru-tiny.json)")
    p.add_argument("--minutes", type=float, help="train.time_budget_minutes (default 15; --tiny 1)")
    p.add_argument("--vocab-size", type=int, help=f"default 8000 (--tiny {TINY_VOCAB})")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--samples", type=int, default=5, help="test sentences translated through the export")
    p.add_argument("--tiny", action="store_true", help="minutes-long smoke run; its numbers mean nothing")
    p.add_argument("--overwrite", action="store_true", help="replace --output and --work-dir")
    args = p.parse_args(argv)
    args.minutes = args.minutes if args.minutes is not None else (1.0 if args.tiny else 15.0)
    args.vocab_size = args.vocab_size or (TINY_VOCAB if args.tiny else 8000)
    args.output = args.output or (args.work_dir / "en-ru-tiny.json" if args.tiny
                                  else common.results_path(__file__, "en-ru.json"))
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    command = common.command_line(STUDY, argv)
    common.refuse_existing([args.output, args.work_dir], args.overwrite)
    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    args.work_dir.mkdir(parents=True)
    if not (args.corpus_dir / "stats.json").is_file():
        build.build(args.corpus_dir, args.cache)
    corpus_stats = json.loads((args.corpus_dir / "stats.json").read_text(encoding="utf-8"))
    corpus = (tiny_corpus(args.corpus_dir, args.work_dir / "tiny-corpus", TINY_PAIRS)
              if args.tiny else args.corpus_dir)
    data_dir, run_dir, export_dir = (args.work_dir / n for n in ("data", "run", "export"))

    t0 = time.time()
    common.run_tf_nmt(*prepare_args(corpus, data_dir, args.vocab_size))
    prepare_minutes = (time.time() - t0) / 60

    from tf_nmt.data.prepared import read_prepared  # noqa: PLC0415 - TensorFlow only from here on
    from tf_nmt.data.tokenizer import SubwordTokenizer  # noqa: PLC0415
    from tf_nmt.run_dir import RunDir  # noqa: PLC0415
    from tf_nmt.training.checkpoints import list_checkpoints  # noqa: PLC0415

    prepared = read_prepared(data_dir)
    tokenizer = SubwordTokenizer.load(data_dir / prepared.manifest["vocab"]["path"])
    test_src, test_tgt = prepared.split_files("test")
    roundtrip = roundtrip_report(read_lines(test_tgt), tokenizer.encode, tokenizer.decode)
    print(f"SentencePiece round trip on test.{TGT}: {roundtrip['exact']}/{roundtrip['sentences']} exact")

    t0 = time.time()
    common.run_tf_nmt("train", "--preset", args.preset, "--data-dir", str(data_dir),
                      "--run-dir", str(run_dir),
                      *common.set_args(train_settings(args.minutes, args.tiny, args.set)))
    train_minutes = (time.time() - t0) / 60
    checkpoints = list_checkpoints(RunDir(run_dir).checkpoints)
    if not checkpoints:
        raise SystemExit(f"{run_dir}: training kept no checkpoint")
    limit = TINY_EVAL if args.tiny else 0
    steps = [int(c.rsplit("-", 1)[1]) for c in checkpoints]
    start = score(evaluate(run_dir, checkpoints[0], args.work_dir / "eval-first.json", limit), steps[0])
    end = score(evaluate(run_dir, checkpoints[-1], args.work_dir / "eval-last.json", limit), steps[-1])

    common.run_tf_nmt("export", "--run-dir", str(run_dir), "--export-dir", str(export_dir))
    sources, references = read_lines(test_src)[:args.samples], read_lines(test_tgt)[:args.samples]
    (args.work_dir / f"samples.{SRC}").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    common.run_tf_nmt("translate", "--export-dir", str(export_dir),
                      "--input", str(args.work_dir / f"samples.{SRC}"),
                      "--output", str(args.work_dir / f"samples.{TGT}"))
    translations = read_lines(args.work_dir / f"samples.{TGT}")
    samples = [{"source": s, "reference": r, "translation": t}
               for s, r, t in zip(sources, references, translations)]

    result = {
        "study": STUDY, "pair": f"{SRC}-{TGT}", "tiny": args.tiny, "command": command,
        "corpus": {"dir": str(args.corpus_dir), "sources": corpus_stats["sources"],
                   "splits": corpus_stats["splits"], "raw_pairs": corpus_stats["raw_pairs"],
                   "packages": corpus_stats["packages"]},
        "prepared": {"splits": prepared.splits, "cleaning": prepared.manifest.get("cleaning"),
                     "vocab": prepared.manifest.get("vocab"), "minutes": round(prepare_minutes, 2)},
        "train": {"preset": args.preset, "settings": train_settings(args.minutes, args.tiny, args.set),
                  "time_budget_minutes": args.minutes, "minutes": round(train_minutes, 2),
                  "steps": steps[-1], "checkpoints": steps},
        "bleu_tokenize": end.get("bleu_tokenize"),
        "test_sentences_scored": limit or prepared.splits.get("test", {}).get("pairs"),
        "start": start, "end": end,
        "sentencepiece_roundtrip": roundtrip,
        "export": {"path": str(export_dir), "samples": samples,
                   "cyrillic_translations": sum(map(has_cyrillic, translations))},
    }
    common.write_result(args.output, result, overwrite=args.overwrite)
    print(f"\nen-ru: test BLEU {start['bleu']:.2f} (step {start['step']}) -> {end['bleu']:.2f} "
          f"(step {end['step']}), chrF {end['chrf']:.2f}, tokenizer {end.get('bleu_tokenize')}, "
          f"{train_minutes:.1f} min")
    for sample in samples:
        print(f"  {sample['source']}\n    -> {sample['translation']}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
