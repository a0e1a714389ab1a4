"""A synthetic parallel corpus of any size with the shape of WMT14 en-de, for the own-corpus
scale measurements only.

It is built for *speed and scale*, not for translation quality: nothing trained on it says
anything about BLEU on real text. What it has is what the preparation, SentencePiece and the
input pipeline see in a real corpus, at a size (millions of pairs) no checkout ships. The text
comes from :mod:`.textgen` (English-like source, German-like target, calibrated on the
built-in Debian corpus, WMT14's mean sentence length; the target a learnable function of the
source); :mod:`.corpus_stats` measures it against the real corpora. This module adds

- planted noise, so that cleaning has work to do: empty source or target lines, overlong pairs
  (over :data:`OVERLONG_CHARS` characters), pairs whose lengths disagree (byte ratio well over 3),
  and exact duplicates of earlier pairs (shares in :data:`SHARES`);
- the files: ``train.<src>`` and ``train.<tgt>`` (default ``xx``, ``yy``), plain or gzipped,
  and ``synthetic.json``, the record of what was written and planted.

The output depends on ``seed`` and nothing else: pairs are made in chunks of :data:`CHUNK`
with a generator seeded by (seed, chunk index), so ``N`` pairs are exactly the first ``N`` lines
of any larger corpus of the same seed (the 0.5M corpus of ``own-corpus-memory`` is the head of
the 5M one). Generation is vectorised with NumPy, chunk by chunk (memory does not grow with the
corpus); the languages take a few seconds to build once per process.

    python -m experiments.own_corpus.make_synthetic --pairs 100000 --out /tmp/synth [--gzip]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from experiments.own_corpus import textgen

OVERLONG_CHARS = 1000      # an overlong pair is longer than this on both sides (prepare's default)
MAX_RATIO = 3.0            # prepare-data's default --max-ratio (characters)
SHARES: Dict[str, float] = {"empty_src": 0.002, "empty_tgt": 0.002, "overlong": 0.001,
                            "misaligned": 0.002, "duplicate": 0.02}
CHUNK = 50_000
FORMAT = "tf-nmt/synthetic-corpus/3"


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


def clean_shape(src: bytes, tgt: bytes) -> bool:
    """True when prepare-data's cleaning keeps the pair: neither side over
    :data:`OVERLONG_CHARS` characters, the longer at most :data:`MAX_RATIO` times the shorter."""
    a, b = len(src.decode("utf-8")), len(tgt.decode("utf-8"))
    return max(a, b) <= OVERLONG_CHARS and max(a, b) <= MAX_RATIO * min(a, b)


def make_chunk(langs: textgen.Languages, seed: int, index: int
               ) -> Tuple[List[bytes], List[bytes], Dict[str, List[int]]]:
    """Chunk ``index``: :data:`CHUNK` (source, target) lines and the noise planted in them."""
    rng = np.random.default_rng([seed, index])
    src: List[bytes] = []
    tgt: List[bytes] = []
    batch = CHUNK + CHUNK // 100 + 10
    while len(src) < CHUNK:
        source = langs.sample(rng, batch)
        target = langs.translate(source)
        # The rare pair that cleaning would reject (about 1 in 70,000: a short source whose
        # words are untranslated, or translated by two long ones) is left out, so that only the
        # planted noise is noise; spare sentences fill its place.
        for s, t in zip(langs.src.lines(source.ids, source.glued, source.lengths),
                        langs.tgt.lines(target.ids, target.glued, target.lengths)):
            if clean_shape(s, t):
                src.append(s)
                tgt.append(t)
        batch = CHUNK // 10
    src, tgt = src[:CHUNK], tgt[:CHUNK]
    planted = plant_noise(rng, src, tgt, langs.tgt.words[0].encode("utf-8"))
    return src, tgt, planted


def calibration_digest() -> str:
    """The committed calibration's SHA-256: a corpus records what it was generated from."""
    return hashlib.sha256(textgen.CALIBRATION.read_bytes()).hexdigest()


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
    langs = textgen.languages()
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
              "generator": {"lexicon": textgen.LEXICON, "mean_tokens": textgen.MEAN_TOKENS,
                            "calibration_sha256": calibration_digest()},
              "chunk": CHUNK, "shares": SHARES, "planted": planted,
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
    p.add_argument("--src-lang", default="xx", help="the source file's suffix (default xx)")
    p.add_argument("--tgt-lang", default="yy", help="the target file's suffix (default yy)")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be >= 1")
    if args.src_lang == args.tgt_lang:
        p.error("--src-lang and --tgt-lang must differ")
    record = generate(args.out, args.pairs, args.seed, args.gzip, args.src_lang, args.tgt_lang)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
