"""The generated corpus against real text: the statistics the pipeline's behaviour depends on.

For each side of a parallel corpus (plain or gzipped files): tokens (words, numbers and each
punctuation mark, :data:`calibrate.TOKEN`), sentence length in tokens (mean, percentiles),
characters per word token, vocabulary growth (types at several token counts, and Heaps'
exponent between them), the Zipf slope of the rank-frequency curve (ranks 1-1,000 and
1,000-10,000), and the number of pieces SentencePiece learns when asked for 32,000, learned as
``tf-nmt prepare-data`` learns it (:func:`tf_nmt.data.own_corpus.vocab.learn` on a seeded
sample of pairs, both sides). Measured for the generated corpus and the built-in Debian corpus
it was calibrated on, beside the published WMT14 en-de figures (:data:`WMT14`, with sources).

    python -m experiments own-corpus-stats [--pairs 4500000] [--work-dir runs/own_corpus]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import random
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from experiments.lib import common
from experiments.own_corpus import corpora, make_synthetic, textgen
from experiments.own_corpus.calibrate import tokens, zipf_slope

RESULTS = "corpus_stats.json"
HEAPS_AT = (10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)
PERCENTILES = (5, 25, 50, 75, 95, 99)
VOCAB_SIZE = 32_000
SPM_SENTENCES = 1_000_000      # prepare-data's default --vocab-sample

# Published figures of the WMT14 en-de training data (Europarl v7, Common Crawl, News
# Commentary v9), with where they come from. Token counts are of tokenised text.
WMT14: Dict[str, Any] = {
    "pairs": {"value": 4_500_000, "source": "Luong, Pham, Manning 2015, Effective Approaches to "
              "Attention-based NMT, sec. 4.1 (4.5M sentence pairs); Vaswani et al. 2017, sec. 5.1 "
              "(about 4.5 million sentence pairs)"},
    "tokens_en": {"value": 116_000_000, "source": "Luong et al. 2015, sec. 4.1 (116M English words)"},
    "tokens_de": {"value": 110_000_000, "source": "Luong et al. 2015, sec. 4.1 (110M German words)"},
    "mean_tokens_en": {"value": 25.8, "source": "116M / 4.5M (derived)"},
    "mean_tokens_de": {"value": 24.4, "source": "110M / 4.5M (derived)"},
    "types_de": {"value": 1_750_000, "at_tokens": 100_000_000,
                 "source": "Sennrich, Haddow, Birch 2016, Neural MT of Rare Words with Subword "
                 "Units, Table 1: German side of the WMT15 en-de training data (WMT14's corpora, "
                 "News Commentary v10), about 100M tokens, 1.75M types (quoted from the paper; "
                 "not re-checked against its text here)"},
    "subword_vocabulary": {"value": 37_000, "source": "Vaswani et al. 2017, sec. 5.1: shared "
                           "source-target BPE vocabulary of about 37,000 tokens"},
}


def read_lines(path: Path, limit: Optional[int] = None) -> Iterator[str]:
    """The lines of a plain or gzipped UTF-8 file (without newlines), at most ``limit``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                return
            yield line.rstrip("\n")


def side_stats(lines: Sequence[str]) -> Dict[str, Any]:
    """Length, word length, vocabulary growth and Zipf slopes of one side's lines."""
    counts: collections.Counter = collections.Counter()
    lengths = np.zeros(len(lines), np.int64)
    growth: List[Dict[str, Any]] = []
    marks = [n for n in HEAPS_AT]
    total = 0
    for i, line in enumerate(lines):
        toks = tokens(line)
        lengths[i] = len(toks)
        if marks and total + len(toks) >= marks[0]:
            # the mark falls inside this line: count its tokens up to the mark exactly
            for j, tok in enumerate(toks):
                counts[tok] += 1
                total += 1
                if marks and total == marks[0]:
                    growth.append({"tokens": total, "types": len(counts)})
                    marks.pop(0)
            continue
        counts.update(toks)
        total += len(toks)
    growth.append({"tokens": total, "types": len(counts)})
    for before, after in zip(growth, growth[1:]):
        after["heaps_exponent"] = round(float(np.log(after["types"] / before["types"])
                                              / np.log(after["tokens"] / before["tokens"])), 3)
    words = [(w, n) for w, n in counts.items() if w[0].isalpha()]
    chars = sum(len(w) * n for w, n in words) / max(1, sum(n for _, n in words))
    freq = list(counts.values())
    return {"lines": len(lines), "tokens": total, "types": len(counts),
            "mean_tokens": round(float(lengths.mean()), 2),
            "length_percentiles": {str(p): float(np.percentile(lengths, p)) for p in PERCENTILES},
            "max_tokens": int(lengths.max()),
            "chars_per_word": round(chars, 2),
            "zipf_slope_1_1000": round(zipf_slope(freq, 1, 1000), 3),
            "zipf_slope_1000_10000": (round(zipf_slope(freq, 1000, 10_000), 3)
                                      if len(freq) >= 10_000 else None),
            "types_at": growth}


def spm_pieces(src: Sequence[str], tgt: Sequence[str], sentences: int, seed: int = 1234
               ) -> Dict[str, Any]:
    """Pieces of the shared vocabulary prepare-data learns when asked for :data:`VOCAB_SIZE`:
    a seeded sample of pairs, ``sentences`` sentences in all, both sides."""
    from tf_nmt.data.own_corpus.vocab import learn, model_facts  # noqa: PLC0415 - imports TF

    pairs = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    take = min(len(pairs), (sentences + 1) // 2)
    sample = random.Random(seed).sample(pairs, take)
    start = time.perf_counter()
    proto = learn([x for pair in sample for x in pair], VOCAB_SIZE, "unigram", seed)
    pieces, _ = model_facts(proto)
    return {"asked": VOCAB_SIZE, "pieces": pieces, "sample_sentences": 2 * take,
            "seconds": round(time.perf_counter() - start, 1)}


def corpus_stats(src_path: Path, tgt_path: Path, pairs: Optional[int], spm_sentences: int,
                 langs: Sequence[str] = ("en", "de")) -> Dict[str, Any]:
    """The statistics of a parallel corpus's first ``pairs`` lines (all when None)."""
    src = list(read_lines(src_path, pairs))
    tgt = list(read_lines(tgt_path, pairs))
    out: Dict[str, Any] = {"files": [str(src_path), str(tgt_path)], "pairs": len(src)}
    for lang, lines in zip(langs, (src, tgt)):
        out[lang] = side_stats(lines)
    if spm_sentences:
        out["sentencepiece"] = spm_pieces(src, tgt, spm_sentences)
    return out


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    work = Path(args.work_dir)
    record = corpora.ensure_synthetic(work, args.pairs, args.seed, args.gzip)
    src, tgt = make_synthetic.corpus_files(corpora.synthetic_dir(work, args.pairs),
                                           corpora.SRC_LANG, corpora.TGT_LANG, args.gzip)
    print("measuring the generated corpus ...", flush=True)
    generated = corpus_stats(src, tgt, None, args.spm_sentences)
    generated["generator"] = {k: record[k] for k in ("pairs", "seed", "seconds", "src_bytes",
                                                      "tgt_bytes", "generator") if k in record}
    debian_dir = Path(args.debian)
    debian: Dict[str, Any] = {"missing": f"no {debian_dir}/train.en (build the built-in corpus)"}
    if (debian_dir / "train.en").is_file():
        print("measuring the Debian corpus ...", flush=True)
        debian = corpus_stats(debian_dir / "train.en", debian_dir / "train.de", None,
                              args.spm_sentences)
    return {"what": "the generated own-corpus text against the built-in Debian corpus it was "
                    "calibrated on and the published WMT14 en-de figures",
            "command": common.command_line("own-corpus-stats", args.argv),
            "generated": generated, "debian": debian, "wmt14_published": WMT14,
            "calibration": {k: v for k, v in textgen.load_calibration()["source"].items()}}


def _fmt(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else (f"{v:.2f}" if isinstance(v, float) else str(v))


def format_table(result: Dict[str, Any]) -> str:
    gen, deb = result["generated"], result["debian"]
    rows = []
    for lang in ("en", "de"):
        for key in ("tokens", "types", "mean_tokens", "chars_per_word", "zipf_slope_1_1000",
                    "zipf_slope_1000_10000"):
            rows.append(f"{lang} {key:<22} {_fmt(gen[lang][key]):>14} "
                        f"{_fmt(deb.get(lang, {}).get(key, '-')):>14}")
    rows.append(f"sentencepiece pieces (32k)  {_fmt(gen.get('sentencepiece', {}).get('pieces')):>14} "
                f"{_fmt(deb.get('sentencepiece', {}).get('pieces', '-')):>14}")
    return "\n".join([f"{'':<25} {'generated':>14} {'debian':>14}", *rows])


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments own-corpus-stats",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=4_500_000, help="generated pairs to measure")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gzip", action="store_true", help="generate (or reuse) the gzipped corpus")
    p.add_argument("--debian", default="data_cache/corpus", help="the built-in corpus directory")
    p.add_argument("--spm-sentences", type=int, default=SPM_SENTENCES,
                   help="sentences sampled to learn the 32k vocabulary (0: skip)")
    corpora.add_study_args(p, "where the generated corpus is written", "20,000 pairs, "
                           "100,000 sentences for SentencePiece, in a temporary work dir",
                           RESULTS)
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if args.pairs < 1 or args.spm_sentences < 0:
        p.error("--pairs must be >= 1 and --spm-sentences >= 0")
    corpora.apply_tiny(args, p, {"pairs": 20_000, "spm_sentences": 100_000})
    return corpora.run_study(args, __file__, RESULTS, measure, format_table)


if __name__ == "__main__":
    raise SystemExit(main())
