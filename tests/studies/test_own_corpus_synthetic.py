"""The synthetic corpus of the own-corpus scale studies: deterministic, a prefix of any larger
corpus of its seed, the pairs asked for, and exactly the noise it says it planted."""
from __future__ import annotations

import collections
import gzip

import pytest

from experiments.own_corpus import make_synthetic as ms, textgen


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(ms, "CHUNK", 4000)


def read_pairs(out_dir, compress=False):
    src, tgt = ms.corpus_files(out_dir, compress=compress)
    opener = gzip.open if compress else open
    with opener(src, "rb") as fs, opener(tgt, "rb") as ft:
        return fs.read().split(b"\n")[:-1], ft.read().split(b"\n")[:-1]


def observed_noise(src, tgt):
    """The noise of each kind found in the lines (kinds as :data:`make_synthetic.SHARES`)."""
    chars = lambda b: len(b.decode("utf-8"))  # noqa: E731
    repeats = collections.Counter(zip(src, tgt))
    return {"empty_src": sum(1 for s in src if not s), "empty_tgt": sum(1 for t in tgt if not t),
            "overlong": sum(1 for s, t in zip(src, tgt)
                            if min(chars(s), chars(t)) > ms.OVERLONG_CHARS),
            "misaligned": sum(1 for s, t in zip(src, tgt)
                              if s and t and max(len(s), len(t)) > 3 * min(len(s), len(t))),
            "duplicate": sum(n - 1 for n in repeats.values())}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    ms.generate(tmp_path / "a", 9000, seed=3)
    ms.generate(tmp_path / "b", 9000, seed=3)
    ms.generate(tmp_path / "c", 9000, seed=4)
    a, b, c = (read_pairs(tmp_path / d) for d in "abc")
    assert a == b
    assert a[0] != c[0] and a[1] != c[1]


def test_a_smaller_corpus_is_the_head_of_a_larger_one(tmp_path):
    small = ms.generate(tmp_path / "small", 5500)          # ends inside the second chunk
    ms.generate(tmp_path / "large", 12000)
    s, t = read_pairs(tmp_path / "small")
    ls, lt = read_pairs(tmp_path / "large")
    assert (s, t) == (ls[:5500], lt[:5500])
    assert small["pairs"] == 5500
    assert small["planted"] == observed_noise(s, t)     # noise cut off with the chunk is not counted


def test_counts_and_planted_noise_are_exact(tmp_path):
    record = ms.generate(tmp_path, 20000, seed=7)
    src, tgt = read_pairs(tmp_path)
    assert len(src) == len(tgt) == 20000
    planted = record["planted"]
    assert planted == observed_noise(src, tgt)
    assert all(count > 0 for count in planted.values())
    assert record["clean_pairs"] == 20000 - sum(planted.values())
    assert record["src_bytes"] == sum(len(s) + 1 for s in src)


def test_sentences_look_like_sentences(tmp_path):
    ms.generate(tmp_path, 8000)
    src, tgt = read_pairs(tmp_path)
    pairs = [(s.split(), t.split()) for s, t in zip(src, tgt)
             if s and t and len(s) < ms.OVERLONG_CHARS and len(t) > 3]
    lengths = sorted(len(s) for s, _ in pairs)               # words, final mark glued
    assert lengths[0] >= textgen.MIN_WORDS and lengths[-1] <= textgen.MAX_WORDS * 1.2
    assert 17 <= lengths[len(lengths) // 2] <= 24            # WMT14-like, mean 25.8 tokens
    assert all(s[-1][-1:] in b".?!" and t[-1][-1:] == s[-1][-1:] for s, t in pairs)
    assert all(s[0][:1].decode("utf-8", "replace").upper() == s[0][:1].decode("utf-8", "replace")
               for s, _ in pairs)                            # a capital (or a digit) first
    assert sum(len(s) != len(t) for s, t in pairs) > len(pairs) // 4     # lengths change
    assert any("ä".encode() in b" ".join(t) for _, t in pairs[:50])      # German letters
    assert max(len(b" ".join(s)) for s, _ in pairs) < ms.OVERLONG_CHARS   # only the planted ones


def test_gzip_holds_the_same_pairs_and_ensure_reuses_a_corpus(tmp_path):
    ms.generate(tmp_path / "plain", 4500, seed=2)
    first = ms.ensure(tmp_path / "gz", 4500, seed=2, compress=True)
    assert read_pairs(tmp_path / "gz", compress=True) == read_pairs(tmp_path / "plain")
    assert "reused" not in first
    assert ms.ensure(tmp_path / "gz", 4500, seed=2, compress=True)["reused"] is True
    assert "reused" not in ms.ensure(tmp_path / "gz", 4600, seed=2, compress=True)
    assert len(read_pairs(tmp_path / "gz", compress=True)[0]) == 4600


def test_only_the_planted_pairs_would_be_cleaned(tmp_path, monkeypatch):
    """A pair the generator makes but prepare-data's cleaning rejects (ratio, length) would be
    counted as noise that was never planted; the generator leaves such pairs out."""
    monkeypatch.setattr(ms, "SHARES", {k: 0.0 for k in ms.SHARES})
    monkeypatch.setattr(ms, "MAX_RATIO", 1.4)     # stricter than prepare-data: many pairs fail it
    ms.generate(tmp_path, 9000, seed=1)
    src, tgt = read_pairs(tmp_path)
    assert len(src) == 9000 and all(ms.clean_shape(s, t) for s, t in zip(src, tgt))
    monkeypatch.setattr(ms, "MAX_RATIO", 3.0)
    assert ms.clean_shape(b"Abl you a of.", b"Leg.") is False      # a pair seed 1 makes
