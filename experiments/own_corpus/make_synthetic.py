"""A synthetic parallel corpus of any size, for the own-corpus scale measurements only.

It is built for *speed and scale*, not for translation quality: nothing trained on it says
anything about BLEU on real text. What it has is what the preparation and the input pipeline
see in a real corpus, at a size (millions of pairs) no checkout ships:

- two pseudo languages (``xx``, ``yy``) of :data:`VOCAB_WORDS` words each, made of syllables
  (frequent words short, rare words long; the target's letters include a few two-byte UTF-8
  ones), words drawn from a Zipf distribution (exponent :data:`ZIPF_EXPONENT`);
- source lengths from a log-normal (median :data:`LENGTH_MEDIAN` words), kept in
  [:data:`MIN_WORDS`, :data:`MAX_WORDS`], plus a final ``.`` or ``?``;
- the target is a fixed word mapping of the source (a frequent source word maps to a frequent
  target word) with local reordering (adjacent words swapped), some words dropped (a few
  article-like frequent words) and some split in two (compounds), so lengths differ by side;
- planted noise, so that cleaning has work to do: empty source or target lines, overlong pairs
  (over :data:`OVERLONG_CHARS` characters), pairs whose lengths disagree (byte ratio well over 3),
  and exact duplicates of earlier pairs (shares in :data:`SHARES`).

The output depends on ``seed`` and nothing else: pairs are made in chunks of :data:`CHUNK`
with a generator seeded by (seed, chunk index), so ``N`` pairs are exactly the first ``N`` lines
of any larger corpus of the same seed (the 0.5M corpus of ``own-corpus-memory`` is the head of
the 5M one). Everything is vectorised with NumPy: 200,000 pairs take about a second on one
core, so 5M pairs well under the 2 minutes the studies allow for it.

    python -m experiments.own_corpus.make_synthetic --pairs 100000 --out /tmp/synth [--gzip]
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

VOCAB_WORDS = 30_000
ZIPF_EXPONENT = 1.07
ZIPF_OFFSET = 2.7          # Zipf-Mandelbrot offset: the top words are a little less dominant
LENGTH_MEDIAN, LENGTH_SIGMA = 15.0, 0.55
MIN_WORDS, MAX_WORDS = 5, 40
SWAP_PROB = 0.12           # an adjacent target word pair swapped (local reordering)
DROP_RANKS = (0, 3, 7)     # article-like frequent source words ...
DROP_PROB = 0.5            # ... left out of the target this often
SPLIT_SHARE = 0.05         # source words whose translation is two target words
QUESTION_SHARE = 0.1
OVERLONG_CHARS = 1000      # an overlong pair is longer than this on both sides (prepare's default)
SHARES: Dict[str, float] = {"empty_src": 0.002, "empty_tgt": 0.002, "overlong": 0.001,
                            "misaligned": 0.002, "duplicate": 0.02}
CHUNK = 50_000
FORMAT = "tf-nmt/synthetic-corpus/1"

SRC_ONSETS, SRC_VOWELS = list("bdfgklmnprstvz"), list("aeiou")
TGT_ONSETS, TGT_VOWELS = list("bcdghjklmnprstw") + ["sch", "ch"], list("aeiouy") + ["ä", "ö", "ü"]


def syllables(onsets: Sequence[str], vowels: Sequence[str]) -> List[str]:
    return [o + v for o in onsets for v in vowels]


def make_words(syl: Sequence[str], count: int) -> List[str]:
    """``count`` distinct words: word ``i`` is ``i`` written in bijective base ``len(syl)`` with
    the syllables as digits, so the ``len(syl)`` most frequent words have one syllable, the next
    ``len(syl)**2`` two, and so on."""
    base, words = len(syl), []
    for i in range(count):
        parts, n = [], i + 1
        while n:
            n, r = divmod(n - 1, base)
            parts.append(syl[r])
        words.append("".join(reversed(parts)))
    return words


class Vocabulary:
    """One language's words as a byte blob with a trailing space each, for vectorised joins."""

    def __init__(self, words: Sequence[str]) -> None:
        encoded = [w.encode("utf-8") + b" " for w in words]
        self.lengths = np.array([len(e) for e in encoded], np.int64)      # with the space
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.blob = np.frombuffer(b"".join(encoded), np.uint8)
        self.words = list(words)

    def lines(self, ids: np.ndarray, lengths: np.ndarray) -> List[bytes]:
        """Sentences of word ``ids`` (flat, ``lengths`` words each, every length >= 1), one
        bytes line each (no newline)."""
        sizes = self.lengths[ids]
        total = int(sizes.sum())
        starts = np.cumsum(sizes) - sizes
        index = np.arange(total, dtype=np.int64) - np.repeat(starts - self.offsets[ids], sizes)
        out = self.blob[index]
        ends = np.cumsum(np.add.reduceat(sizes, np.cumsum(lengths) - lengths)) - 1
        out[ends] = ord("\n")                                # the last word's space ends the line
        return out.tobytes().split(b"\n")[:-1]


class Languages:
    """The two pseudo languages and the fixed word mapping between them (from ``seed``)."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng([seed, 0xC0DE])
        self.src = Vocabulary(make_words(syllables(SRC_ONSETS, SRC_VOWELS), VOCAB_WORDS - 2)
                              + [".", "?"])
        self.tgt = Vocabulary(make_words(syllables(TGT_ONSETS, TGT_VOWELS), VOCAB_WORDS - 2)
                              + [".", "?"])
        n = VOCAB_WORDS - 2
        ranks = np.arange(n, dtype=np.float64)
        weights = 1.0 / (ranks + ZIPF_OFFSET) ** ZIPF_EXPONENT
        self.cdf = np.cumsum(weights / weights.sum())
        # A frequent source word maps to a frequent target word: sort ranks jittered by ~30%.
        order = np.argsort(ranks * rng.uniform(0.7, 1.3, n), kind="stable")
        mapping = np.empty(n, np.int64)
        mapping[order] = np.arange(n)
        self.mapping = np.concatenate([mapping, [n, n + 1]])           # "." and "?" map to themselves
        self.second = np.full(VOCAB_WORDS, -1, np.int64)                # compounds: a second word
        split = rng.choice(np.arange(50, n), int(SPLIT_SHARE * n), replace=False)
        self.second[split] = rng.integers(0, 2000, split.size)
        self.droppable = np.zeros(VOCAB_WORDS, bool)
        self.droppable[list(DROP_RANKS)] = True
        self.stop, self.question = n, n + 1

    def sample(self, rng: np.random.Generator, count: int) -> Tuple[np.ndarray, np.ndarray]:
        """``count`` source sentences: flat word ids and words per sentence (with the final mark)."""
        lengths = np.rint(np.exp(rng.normal(np.log(LENGTH_MEDIAN), LENGTH_SIGMA, count)))
        for _ in range(4):  # redraw the lengths out of range (a clip would pile them at the ends)
            out = (lengths < MIN_WORDS) | (lengths > MAX_WORDS)
            lengths[out] = np.rint(np.exp(rng.normal(np.log(LENGTH_MEDIAN), LENGTH_SIGMA,
                                                     int(out.sum()))))
        lengths = np.clip(lengths, MIN_WORDS, MAX_WORDS).astype(np.int64)
        words = np.searchsorted(self.cdf, rng.random(int(lengths.sum())), side="right")
        words = np.minimum(words, VOCAB_WORDS - 3)
        ends = np.cumsum(lengths + 1) - 1
        ids = np.empty(int(lengths.sum()) + count, np.int64)
        mask = np.ones(ids.size, bool)
        mask[ends] = False
        ids[mask] = words
        ids[ends] = np.where(rng.random(count) < QUESTION_SHARE, self.question, self.stop)
        return ids, lengths + 1

    def translate(self, rng: np.random.Generator, ids: np.ndarray, lengths: np.ndarray
                  ) -> Tuple[np.ndarray, np.ndarray]:
        """The target sentences of source sentences (flat ``ids``, ``lengths``)."""
        sentence = np.repeat(np.arange(lengths.size), lengths)
        first = np.zeros(ids.size, bool)
        first[np.cumsum(lengths) - lengths] = True
        # Swap adjacent words of the same sentence (never the final mark, never overlapping).
        can = np.zeros(ids.size, bool)
        can[:-2] = (sentence[:-2] == sentence[2:])
        swap = can & (rng.random(ids.size) < SWAP_PROB)
        swap[1:] &= ~swap[:-1]
        at = np.flatnonzero(swap)
        ids = ids.copy()
        ids[at], ids[at + 1] = ids[at + 1], ids[at].copy()
        out = self.mapping[ids]
        # Drop article-like words (never a sentence's first word), split compounds in two.
        drop = self.droppable[ids] & ~first & (rng.random(ids.size) < DROP_PROB)
        extra = self.second[ids]
        copies = np.where(drop, 0, 1 + (extra >= 0))
        flat = np.repeat(out, copies)
        second_at = np.cumsum(copies)[copies == 2] - 1
        flat[second_at] = extra[copies == 2]
        new_lengths = np.bincount(sentence, weights=copies, minlength=lengths.size).astype(np.int64)
        return flat, new_lengths


def plant_noise(rng: np.random.Generator, src: List[bytes], tgt: List[bytes],
                short_word: bytes) -> Dict[str, List[int]]:
    """Turn some pairs of the chunk into noise, in place; the planted line numbers by kind
    (``duplicate`` as (line, original) pairs flattened). Every kind gets its own lines and a
    duplicate copies an untouched line before it."""
    n = len(src)
    counts = {k: int(rng.binomial(n, share)) for k, share in SHARES.items()}
    lines = rng.permutation(n)
    planted: Dict[str, List[int]] = {}
    start = 0
    for kind, count in counts.items():
        planted[kind] = sorted(int(i) for i in lines[start:start + count])
        start += count
    clean = np.sort(lines[start:])
    for i in planted["empty_src"]:
        src[i] = b""
    for i in planted["empty_tgt"]:
        tgt[i] = b""
    for i in planted["overlong"]:
        chars = min(len(src[i].decode("utf-8")), len(tgt[i].decode("utf-8")))
        times = OVERLONG_CHARS // max(1, chars) + 1
        src[i], tgt[i] = b" ".join([src[i]] * times), b" ".join([tgt[i]] * times)
    for i in planted["misaligned"]:
        tgt[i] = short_word
    pairs: List[int] = []
    for i in planted["duplicate"]:
        earlier = clean[:np.searchsorted(clean, i)]
        if earlier.size == 0:
            continue
        j = int(earlier[rng.integers(earlier.size)])
        src[i], tgt[i] = src[j], tgt[j]
        pairs += [i, j]
    planted["duplicate"] = pairs
    return planted


def make_chunk(langs: Languages, seed: int, index: int) -> Tuple[List[bytes], List[bytes],
                                                                   Dict[str, List[int]]]:
    """Chunk ``index``: :data:`CHUNK` (source, target) lines and the noise planted in them."""
    rng = np.random.default_rng([seed, index])
    ids, lengths = langs.sample(rng, CHUNK)
    tgt_ids, tgt_lengths = langs.translate(rng, ids, lengths)
    src, tgt = langs.src.lines(ids, lengths), langs.tgt.lines(tgt_ids, tgt_lengths)
    planted = plant_noise(rng, src, tgt, langs.tgt.words[0].encode("utf-8"))
    return src, tgt, planted


def corpus_files(out_dir: Path, src_lang: str = "xx", tgt_lang: str = "yy",
                 compress: bool = False) -> Tuple[Path, Path]:
    """The (source, target) files :func:`generate` writes in ``out_dir``."""
    suffix = ".gz" if compress else ""
    return out_dir / f"train.{src_lang}{suffix}", out_dir / f"train.{tgt_lang}{suffix}"


def _open(path: Path, compress: bool):
    # Level 1: gzip at its default level would take longer than the generation itself.
    return gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")


def generate(out_dir: Path, pairs: int, seed: int = 1, compress: bool = False,
             src_lang: str = "xx", tgt_lang: str = "yy") -> Dict[str, Any]:
    """Write ``pairs`` synthetic pairs to :func:`corpus_files` in ``out_dir`` (gzipped when
    ``compress``) and ``synthetic.json`` beside them; returns that record: the settings, the
    planted noise counts (``planted``), the clean pairs expected, bytes and seconds."""
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    langs = Languages(seed)
    planted = {"empty_src": 0, "empty_tgt": 0, "overlong": 0, "misaligned": 0, "duplicate": 0}
    src_path, tgt_path = corpus_files(out_dir, src_lang, tgt_lang, compress)
    written = {"src_bytes": 0, "tgt_bytes": 0}
    with _open(src_path, compress) as fs, _open(tgt_path, compress) as ft:
        for index in range(-(-pairs // CHUNK)):
            keep = min(CHUNK, pairs - index * CHUNK)
            src, tgt, noise = make_chunk(langs, seed, index)
            for kind in ("empty_src", "empty_tgt", "overlong", "misaligned"):
                planted[kind] += sum(1 for i in noise[kind] if i < keep)
            dups = noise["duplicate"]
            planted["duplicate"] += sum(1 for i in dups[::2] if i < keep)  # twins come earlier
            src_text = b"\n".join(src[:keep]) + b"\n"
            tgt_text = b"\n".join(tgt[:keep]) + b"\n"
            fs.write(src_text)
            ft.write(tgt_text)
            written["src_bytes"] += len(src_text)
            written["tgt_bytes"] += len(tgt_text)
    record = {"format": FORMAT, "pairs": pairs, "seed": seed, "compressed": compress,
              "languages": [src_lang, tgt_lang], "files": [src_path.name, tgt_path.name],
              "vocab_words": VOCAB_WORDS, "chunk": CHUNK, "shares": SHARES, "planted": planted,
              "clean_pairs": pairs - sum(planted.values()), **written,
              "seconds": round(time.perf_counter() - start, 2)}
    (out_dir / "synthetic.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def ensure(out_dir: Path, pairs: int, seed: int = 1, compress: bool = False,
           src_lang: str = "xx", tgt_lang: str = "yy") -> Dict[str, Any]:
    """:func:`generate`, unless ``out_dir`` already holds that very corpus (its
    ``synthetic.json`` records the same pairs, seed, compression and languages, and the files
    are there): then its record, with ``"reused": True``."""
    meta = Path(out_dir) / "synthetic.json"
    if meta.is_file():
        record = json.loads(meta.read_text())
        same = (record.get("format") == FORMAT and record.get("pairs") == pairs
                and record.get("seed") == seed and record.get("compressed") == compress
                and record.get("languages") == [src_lang, tgt_lang])
        if same and all(p.is_file() for p in corpus_files(Path(out_dir), src_lang, tgt_lang,
                                                          compress)):
            return {**record, "reused": True}
    return generate(Path(out_dir), pairs, seed, compress, src_lang, tgt_lang)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.own_corpus.make_synthetic",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=100_000)
    p.add_argument("--out", type=Path, required=True, help="directory for train.xx, train.yy")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gzip", action="store_true", help="write train.xx.gz, train.yy.gz")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be >= 1")
    record = generate(args.out, args.pairs, args.seed, args.gzip)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
