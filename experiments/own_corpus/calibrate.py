"""Write :data:`textgen.CALIBRATION` from the built-in Debian en-de corpus.

What the generator takes from real text, per language: a letter trigram model of the word types
(words of letters only, from letters seen in at least :data:`MIN_LETTER_TYPES` types), the
Zipf slope of the 1,000 most frequent words, the shares of commas, numbers and sentence-final
marks among tokens, and the spread of the sentence length (log-normal sigma). The corpus is not
committed (``tf-nmt`` builds it from Debian packages: ``data_cache/corpus``); the calibration is.

    python -m experiments.own_corpus.calibrate [--corpus data_cache/corpus]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from experiments.own_corpus import textgen
from tf_nmt.utils.io import write_json_atomic

TOKEN = re.compile(r"\w+|[^\w\s]")      # words, numbers and each punctuation mark (as Moses does)
WORD = re.compile(r"^[^\W\d_]+$")       # a word of letters only
MIN_LETTER_TYPES = 20
HEAD_RANKS = 1000
HEAD_WORDS = 2000       # the most frequent real words, kept as the generated languages' head


def tokens(line: str) -> List[str]:
    return TOKEN.findall(line)


def zipf_slope(counts: Sequence[int], first: int = 1, last: int = HEAD_RANKS) -> float:
    """Minus the least-squares slope of log frequency on log rank over ranks first..last."""
    f = np.sort(np.asarray(counts, np.float64))[::-1]
    last = min(last, f.size)
    r = np.arange(1, f.size + 1, dtype=np.float64)
    sel = slice(first - 1, last)
    return float(-np.polyfit(np.log(r[sel]), np.log(f[sel]), 1)[0])


def calibrate_language(lines: Sequence[str]) -> Dict[str, Any]:
    toks = [tokens(line) for line in lines]
    flat = [t for ts in toks for t in ts]
    counts = collections.Counter(flat)
    types = [w for w in counts if WORD.match(w)]
    letter_types = collections.Counter(ch for w in types for ch in set(w))
    # The letter model learns from ordinary words: two letters or more, not all capitals.
    kept = [w for w in types if len(w) > 1 and not w.isupper()
            and all(letter_types[ch] >= MIN_LETTER_TYPES for ch in w)]
    head = [w for w, _ in counts.most_common() if WORD.match(w)][:HEAD_WORDS]
    trigrams: collections.Counter = collections.Counter()
    for w in kept:
        padded = "^^" + w + "$"
        for i in range(2, len(padded)):
            trigrams[padded[i - 2:i + 1]] += 1
    words = list(counts.values())         # every token, as corpus_stats measures the slope
    lengths = np.array([len(t) for t in toks])
    ends = collections.Counter(line.rstrip()[-1:] for line in lines)
    marks = [ends["."], ends["?"], ends["!"]]
    return {"zipf_head_slope": round(zipf_slope(words), 4),
            "comma_share": round(counts[","] / len(flat), 5),
            "number_share": round(sum(n for w, n in counts.items() if w.isdigit()) / len(flat), 5),
            "end_shares": [round(m / sum(marks), 5) for m in marks[:-1]]
            + [round(1 - sum(round(m / sum(marks), 5) for m in marks[:-1]), 5)],
            "log_length_sigma": round(float(np.log(lengths[lengths >= 3]).std()), 4),
            "word_types": len(kept),
            "head_words": head,
            "trigrams": dict(sorted(trigrams.items()))}


def calibrate(corpus: Path) -> Dict[str, Any]:
    """The calibration record of the Debian corpus directory ``corpus`` (train.en, train.de)."""
    record: Dict[str, Any] = {"format": "tf-nmt/textgen-calibration/1", "languages": {}}
    source: Dict[str, Any] = {"corpus": "tf-nmt built-in Debian en-de corpus, train split"}
    stats = Path(corpus) / "stats.json"
    if stats.is_file():
        meta = json.loads(stats.read_text())
        source["packages"] = meta.get("packages")
        source["builder_version"] = meta.get("builder_version")
    for lang in ("en", "de"):
        raw = (Path(corpus) / f"train.{lang}").read_bytes()
        source[f"train.{lang}.sha256"] = hashlib.sha256(raw).hexdigest()
        lines = raw.decode("utf-8").split("\n")[:-1]
        source["lines"] = len(lines)
        record["languages"][lang] = calibrate_language(lines)
    record["source"] = source
    return record


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.own_corpus.calibrate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=Path("data_cache/corpus"),
                   help="the built-in corpus directory (train.en, train.de)")
    p.add_argument("--out", type=Path, default=textgen.CALIBRATION)
    args = p.parse_args(argv)
    if not (args.corpus / "train.en").is_file():
        p.error(f"no train.en in {args.corpus}: build the built-in corpus first (tf-nmt prepare-data)")
    record = calibrate(args.corpus)
    write_json_atomic(args.out, record, indent=None)  # one line: the trigram tables are long
    for lang, cal in record["languages"].items():
        print(lang, {k: v for k, v in cal.items() if k != "trigrams"}, len(cal["trigrams"]), "trigrams")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
