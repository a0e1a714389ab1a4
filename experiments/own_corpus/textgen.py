"""WMT-shaped English-like and German-like text, and a learnable translation between them.

The own-corpus scale studies need millions of pairs that the preparation, SentencePiece and the
input pipeline see as they would see WMT14 en-de. This module makes them from a small committed
calibration (:data:`CALIBRATION`, written by :mod:`.calibrate` from the built-in Debian en-de
corpus):

- **words** come from a letter trigram model of each language's real word types (what
  SentencePiece learns its pieces from), so their letters, lengths and shared stems look like
  English or German; short words are the frequent ones, as in real text;
- **word frequencies** follow a Zipf-Mandelbrot law whose head slope is fitted on the Debian
  corpus and whose tail is steeper (rank > :data:`TAIL_RANK`), plus a share of compounds
  (two lexicon words glued together, German-style; open-ended, so the vocabulary keeps growing
  with the corpus as WMT's does, Heaps' law);
- **sentence lengths** are log-normal with the Debian corpus's spread and WMT14's mean
  (:data:`MEAN_TOKENS`), commas and a final ``.``/``?``/``!`` at the Debian shares, numbers
  (copied by the translation) at the Debian share; the first word is capitalised;
- the **target** is a deterministic function of the source: each source word maps to one
  target word (frequent to frequent; numbers copied), a few to two words or to none, two
  adjacent "nouns" become one compound, the first "verb" of a clause moves to its end
  (German verb-final order), so sides differ in length and order but the mapping is learnable.

Everything is NumPy over flat token arrays; the languages (lexicons, classes, mapping) are a
function of :data:`LANGUAGE_SEED`, sentences of the corpus's (seed, chunk).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

CALIBRATION = Path(__file__).resolve().parent / "calibration.json"

LANGUAGE_SEED = 1
LEXICON = 300_000          # words per language lexicon (the Zipf component's ranks)
TAIL_RANK = 1_000          # past this rank the Zipf slope is TAIL_SLOPE (rare words are rarer)
TAIL_SLOPE = 1.45
ZIPF_OFFSET = 2.7          # Zipf-Mandelbrot q: f(r) ~ (r + q)^-s
COMPOUND_SHARE = 0.012     # source words that are two lexicon words glued (open vocabulary)
COMPOUND_PART_MIN = 300    # compound parts are content words: ranks past this
MEAN_TOKENS = 25.8         # WMT14 en: 116M words / 4.5M sentences (Luong et al. 2015)
MIN_WORDS, MAX_WORDS = 3, 90
MAX_WORD_CHARS = 18
NUMBER_SHARE = 0.012       # of sampled words, from the Debian corpus (digit tokens)
NUMBER_TYPES = 20_000
DROP_TYPES = (2, 3, 9)      # source ranks (among the top 20) with no translation
SPLIT_SHARE = 0.04         # source types translated by two target words
NOUN, VERB = 1, 2
CLASS_SHARES = {NOUN: 0.40, VERB: 0.15}
JOIN_SHARE = 0.15         # source nouns that join a following noun into one target compound
RANK_JITTER = 0.3          # a source rank maps to a target rank within about this factor
LENGTH_NOISE = 1.2         # word length's weight against noise when ranking words by frequency
RANK_NOISE = 0.6

# Token ids beyond the lexicon: punctuation, glued to the word before it.
COMMA, STOP, QUESTION, EXCLAIM = range(LEXICON, LEXICON + 4)
PUNCT = {COMMA: ",", STOP: ".", QUESTION: "?", EXCLAIM: "!"}
SIZE = LEXICON + len(PUNCT)


def load_calibration(path: Path = CALIBRATION) -> Dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def languages() -> "Languages":
    """The two languages, from the committed calibration and :data:`LANGUAGE_SEED`, built once
    per process (it takes seconds: two lexicons of :data:`LEXICON` words). They are fixed, as
    English and German are; a corpus's seed chooses its sentences."""
    return Languages(LANGUAGE_SEED, load_calibration())


class CharModel:
    """A letter trigram model of one language's word types: P(c | two letters before), with
    ``^`` padding the start and ``$`` ending a word."""

    def __init__(self, trigrams: Dict[str, int]) -> None:
        letters = sorted({ch for t in trigrams for ch in t} - {"^", "$"})
        self.alphabet = ["^", "$"] + letters
        index = {ch: i for i, ch in enumerate(self.alphabet)}
        size = len(self.alphabet)
        counts = np.zeros((size * size, size), np.float64)
        for tri, n in trigrams.items():
            counts[index[tri[0]] * size + index[tri[1]], index[tri[2]]] += n
        totals = counts.sum(1, keepdims=True)
        self.cdf = np.cumsum(counts / np.maximum(totals, 1), axis=1)
        self.cdf[:, -1] = 1.0
        self.size = size
        self.flat = (self.cdf + np.arange(size * size)[:, None]).ravel()

    def sample(self, rng: np.random.Generator, count: int) -> List[str]:
        """``count`` words (not distinct), each at most :data:`MAX_WORD_CHARS` letters."""
        size = self.size
        out = np.zeros((count, MAX_WORD_CHARS), np.int64)
        prev2 = np.zeros(count, np.int64)
        prev1 = np.zeros(count, np.int64)
        active = np.arange(count)
        for pos in range(MAX_WORD_CHARS):
            # Row ``ctx`` of the flat table holds ctx + cdf: one search finds the letter.
            ctx = prev2[active] * size + prev1[active]
            nxt = np.searchsorted(self.flat, ctx + rng.random(active.size), side="right") - ctx * size
            nxt = np.minimum(nxt, size - 1)
            out[active, pos] = nxt
            prev2[active], prev1[active] = prev1[active], nxt
            active = active[nxt != 1]
            if active.size == 0:
                break
        # Letters as a fixed-width unicode array; "\0" past a word's end, which NumPy strips.
        letters = np.array(["\0", "\0"] + self.alphabet[2:], dtype="<U1")
        ended = np.cumsum(out == 1, axis=1) > 0
        chars = np.where(ended, "\0", letters[out])
        return np.ascontiguousarray(chars).view(f"<U{MAX_WORD_CHARS}").ravel().tolist()


def make_lexicon(model: CharModel, rng: np.random.Generator, size: int,
                 numbers: np.ndarray, head: Sequence[str] = ()) -> List[str]:
    """``size`` distinct words by frequency rank: the real ``head`` words first, then char-model
    words ranked shortest first (with noise, as in real text); the number strings at the ranks
    ``numbers`` holds."""
    need = size - numbers.size - len(head)
    seen = set(head)
    words: List[str] = []
    while len(words) < need:
        for w in model.sample(rng, int((need - len(words)) * 1.3) + 1000):
            if w not in seen:
                seen.add(w)
                words.append(w)
    words = words[:need]
    lengths = np.array([len(w) for w in words], np.float64)
    order = np.argsort(LENGTH_NOISE * np.log(lengths) + rng.standard_normal(need) * RANK_NOISE,
                       kind="stable")
    ranked = list(head) + [words[i] for i in order]
    out: List[str] = [""] * size
    number_set = set(numbers.tolist())
    strings = iter(make_numbers(rng, numbers.size))
    rest = iter(ranked)
    for r in range(size):
        out[r] = next(strings) if r in number_set else next(rest)
    return out


def make_numbers(rng: np.random.Generator, count: int) -> List[str]:
    """``count`` distinct number strings, most frequent first: small integers, years, decimals,
    then random larger integers."""
    pool = ([str(i) for i in range(0, 100)] + [str(y) for y in range(2030, 1899, -1)]
            + [f"{i / 10:.1f}" for i in range(1, 1000)] + [str(i) for i in range(100, 1000)])
    pool = list(dict.fromkeys(pool))
    seen = set(pool)
    while len(pool) < count:
        for v in rng.integers(1000, 10**7, count):
            s = str(int(v))
            if s not in seen:
                seen.add(s)
                pool.append(s)
    return pool[:count]


def zipf_cdf(size: int, head_slope: float, start: int = 0) -> np.ndarray:
    """Cumulative probabilities of ranks ``start..size-1``: (r + q)^-head_slope, continued
    with :data:`TAIL_SLOPE` past :data:`TAIL_RANK` (continuous at the join)."""
    r = np.arange(start, size, dtype=np.float64) + 1
    w = (r + ZIPF_OFFSET) ** -head_slope
    tail = r > TAIL_RANK
    w[tail] = ((TAIL_RANK + ZIPF_OFFSET) ** -head_slope
               * ((r[tail] + ZIPF_OFFSET) / (TAIL_RANK + ZIPF_OFFSET)) ** -TAIL_SLOPE)
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


class Lexicon:
    """One language's words as byte blobs for vectorised joins: every id has three spellings,
    `` word``, `` Word`` (sentence start) and ``word`` (glued: a compound's second part);
    punctuation is glued in all three."""

    def __init__(self, words: Sequence[str], german_compounds: bool) -> None:
        variants: List[bytes] = []
        for w in list(words) + list(PUNCT.values()):
            if w in PUNCT.values():
                variants += [w.encode()] * 3
                continue
            tail = w[:1].lower() + w[1:] if german_compounds else w
            variants += [(" " + w).encode(), (" " + w[:1].upper() + w[1:]).encode(),
                         tail.encode()]
        self.lengths = np.array([len(v) for v in variants], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.blob = np.frombuffer(b"".join(variants), np.uint8)
        self.words = list(words)

    def lines(self, ids: np.ndarray, glued: np.ndarray, lengths: np.ndarray) -> List[bytes]:
        """Sentences of token ``ids`` (flat, ``lengths`` tokens each, >= 1), ``glued`` marking a
        token written without a space before it; the first token is capitalised."""
        first = np.zeros(ids.size, bool)
        first[np.cumsum(lengths) - lengths] = True
        variant = np.where(glued, 2, np.where(first, 1, 0))
        # A sentence's first token is a word with a leading space: turn that space into "\n".
        keys = ids * 3 + variant
        sizes = self.lengths[keys]
        starts = np.cumsum(sizes) - sizes
        index = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts - self.offsets[keys],
                                                                         sizes)
        out = self.blob[index]
        out[starts[first]] = ord("\n")
        return out.tobytes().split(b"\n")[1:]


@dataclass
class Sentences:
    """Flat tokens of a batch of sentences: ids, glued flags, tokens per sentence."""
    ids: np.ndarray
    glued: np.ndarray
    lengths: np.ndarray


class Languages:
    """The source and target languages and the translation between them, from ``seed``."""

    def __init__(self, seed: int, calibration: Dict[str, Any]) -> None:
        rng = np.random.default_rng([seed, 0xC0DE])
        src_cal, tgt_cal = calibration["languages"]["en"], calibration["languages"]["de"]
        self.src_cal, self.tgt_cal = src_cal, tgt_cal
        # Number ranks: the same in both languages (translated by copying).
        numbers = np.sort(rng.choice(np.arange(20, LEXICON), NUMBER_TYPES, replace=False))
        self.src_words = make_lexicon(CharModel(src_cal["trigrams"]), rng, LEXICON, numbers,
                                      src_cal["head_words"])
        tgt_words = make_lexicon(CharModel(tgt_cal["trigrams"]), rng, LEXICON, numbers,
                                 tgt_cal["head_words"])
        for r in numbers:                               # the same strings on both sides
            tgt_words[r] = self.src_words[r]
        self.src = Lexicon(self.src_words, german_compounds=False)
        self.tgt = Lexicon(tgt_words, german_compounds=True)
        self.word_cdf = zipf_cdf(LEXICON, src_cal["zipf_head_slope"])
        self.part_cdf = zipf_cdf(LEXICON, src_cal["zipf_head_slope"], start=COMPOUND_PART_MIN)
        is_number = np.zeros(LEXICON, bool)
        is_number[numbers] = True
        # Number tokens are drawn apart (their share is calibrated), not from the Zipf law.
        self.numbers = numbers                    # ranks of the number strings, most frequent first
        self.number_cdf = np.cumsum(1.0 / (np.arange(NUMBER_TYPES) + 1 + ZIPF_OFFSET))
        self.number_cdf /= self.number_cdf[-1]
        self.is_number = is_number
        # Translation: a frequent source word maps to a frequent target word (ranks jittered),
        # numbers to themselves, punctuation to itself.
        words = np.flatnonzero(~is_number)
        jitter = np.exp(rng.uniform(-RANK_JITTER, RANK_JITTER, words.size))
        order = words[np.argsort(np.arange(words.size) * jitter, kind="stable")]
        mapping = np.arange(SIZE, dtype=np.int64)
        mapping[words] = order
        self.mapping = mapping
        self.second = np.full(SIZE, -1, np.int64)
        split = rng.choice(words[words >= 30], int(SPLIT_SHARE * words.size), replace=False)
        self.second[split] = words[rng.integers(0, 2000, split.size)]
        self.drop = np.zeros(SIZE, bool)
        self.drop[list(DROP_TYPES)] = True
        self.word_class = np.zeros(SIZE, np.int8)
        u = rng.random(LEXICON)
        self.word_class[:LEXICON][u < CLASS_SHARES[NOUN]] = NOUN
        self.word_class[:LEXICON][(u >= CLASS_SHARES[NOUN])
                                  & (u < CLASS_SHARES[NOUN] + CLASS_SHARES[VERB])] = VERB
        self.word_class[:LEXICON][is_number] = 0
        self.word_class[:50] = 0                      # the most frequent words are function words
        self.joins = np.zeros(SIZE, bool)
        self.joins[:LEXICON] = (self.word_class[:LEXICON] == NOUN) & (rng.random(LEXICON) < JOIN_SHARE)

        # Tokens per sentence: words, commas and the final mark; their mean is MEAN_TOKENS.
        per_word = 1 + src_cal["comma_share"] / (1 - src_cal["comma_share"])
        self.length_mu = solve_length_mu((MEAN_TOKENS - 1) / per_word, src_cal["log_length_sigma"])

    # -- the source -------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, count: int) -> Sentences:
        """``count`` source sentences."""
        cal = self.src_cal
        words = sentence_words(rng, count, self.length_mu, cal["log_length_sigma"])
        total = int(words.sum())
        ids = np.searchsorted(self.word_cdf, rng.random(total), side="right")
        ids = np.minimum(ids, LEXICON - 1)
        ids = np.where(self.is_number[ids], ids - 1, ids)          # numbers come only from below
        num = rng.random(total) < cal["number_share"]
        which = np.searchsorted(self.number_cdf, rng.random(int(num.sum())), side="right")
        ids[num] = self.numbers[np.minimum(which, self.numbers.size - 1)]
        glued = np.zeros(total, bool)
        # Compounds: a second content word glued to this one (never after a number).
        comp = (rng.random(total) < COMPOUND_SHARE) & ~num & (ids >= COMPOUND_PART_MIN)
        parts = np.searchsorted(self.part_cdf, rng.random(int(comp.sum())), side="right")
        parts = np.minimum(parts + COMPOUND_PART_MIN, LEXICON - 1)
        parts = np.where(self.is_number[parts], parts - 1, parts)
        ids, glued, words = _insert_after(ids, glued, words, comp, parts, True)
        # Commas after a word (not the last), and the final mark.
        n = ids.size
        sentence = np.repeat(np.arange(count), words)
        last = np.zeros(n, bool)
        last[np.cumsum(words) - 1] = True
        nxt_glued = np.append(glued[1:], False)
        comma = (rng.random(n) < cal["comma_share"] / (1 - cal["comma_share"])) & ~last & ~nxt_glued
        comma &= np.append(sentence[1:] == sentence[:-1], False)
        ids, glued, words = _insert_after(ids, glued, words, comma,
                                          np.full(int(comma.sum()), COMMA), True)
        ends = rng.choice([STOP, QUESTION, EXCLAIM], count, p=cal["end_shares"])
        ids, glued, words = _insert_after(ids, glued, words, _last_of(words),
                                          ends, True)
        return Sentences(ids, glued, words)

    # -- the translation ----------------------------------------------------------------------
    def translate(self, src: Sentences) -> Sentences:
        """The target of each source sentence: a function of the source tokens alone."""
        ids, glued, lengths = src.ids, src.glued, src.lengths
        n = ids.size
        sentence = np.repeat(np.arange(lengths.size), lengths)
        pos = np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        cls = self.word_class[ids]
        # Compounds: a glued source part, and two adjacent nouns, join into one target word.
        same_next = np.append(sentence[1:] == sentence[:-1], False)
        join = np.zeros(n, bool)                       # this token is glued to the one before
        join[1:] = glued[1:] & (ids[1:] < LEXICON)
        nn = self.joins[ids] & np.append(cls[1:] == NOUN, False) & same_next & ~np.append(glued[1:], False) & ~glued
        nn[1:] &= ~nn[:-1]                             # non-overlapping pairs
        join[1:] |= nn[:-1]
        # Clause ends: punctuation; the first verb after a clause's first word moves there.
        punct = ids >= LEXICON
        clause = np.cumsum(np.concatenate([[True], (punct[:-1]) | (sentence[1:] != sentence[:-1])]))
        verb = (cls == VERB) & ~join & ~np.append(join[1:], False) & (pos > 0)
        first_of_clause = np.concatenate([[True], clause[1:] != clause[:-1]])
        verb &= ~first_of_clause
        # The first such verb of each clause.
        vclause = clause[verb]
        first_verb = np.zeros(n, bool)
        at = np.flatnonzero(verb)
        keep = np.concatenate([[True], vclause[1:] != vclause[:-1]]) if at.size else np.zeros(0, bool)
        first_verb[at[keep]] = True
        # Clause end position: the punctuation closing the clause (every clause has one).
        clause_end = np.zeros(clause.max() + 1, np.int64)
        clause_end[clause[punct]] = np.flatnonzero(punct)
        key = np.arange(n, dtype=np.float64)
        key[first_verb] = clause_end[clause[first_verb]] - 0.5
        order = np.argsort(key, kind="stable")
        ids, join = ids[order], join[order]
        drop = self.drop[ids] & (pos[order] > 0)        # a sentence keeps its first word
        out = self.mapping[ids]
        second = self.second[ids]
        # Dropped words vanish; split words get a second target word after them.
        copies = np.where(drop & ~join & ~np.append(join[1:], False), 0, 1 + (second >= 0))
        sent_sorted = sentence  # the order never crosses sentences
        flat = np.repeat(out, copies)
        flat_join = np.repeat(join, copies)
        second_at = np.cumsum(copies)[copies == 2] - 1
        flat[second_at] = second[copies == 2]
        flat_join[second_at] = False
        new_lengths = np.bincount(sent_sorted, weights=copies, minlength=lengths.size).astype(np.int64)
        glued_out = flat_join | (flat >= LEXICON)
        # A sentence never starts glued (its first word may have been dropped).
        first = np.cumsum(new_lengths) - new_lengths
        glued_out[first] = False
        return Sentences(flat, glued_out, new_lengths)


def sentence_words(rng: np.random.Generator, count: int, mu: float, sigma: float) -> np.ndarray:
    """Words per sentence: log-normal, redrawn outside [MIN_WORDS, MAX_WORDS] (a clip would
    pile them up at the ends)."""
    words = np.rint(np.exp(rng.normal(mu, sigma, count)))
    for _ in range(6):
        out = (words < MIN_WORDS) | (words > MAX_WORDS)
        words[out] = np.rint(np.exp(rng.normal(mu, sigma, int(out.sum()))))
    return np.clip(words, MIN_WORDS, MAX_WORDS).astype(np.int64)


def solve_length_mu(mean: float, sigma: float) -> float:
    """The log-normal's mu that gives :func:`sentence_words` the mean ``mean`` (the redraws and
    the rounding move it off the closed form), found on a fixed sample."""
    mu = np.log(mean) - sigma ** 2 / 2
    for _ in range(4):
        got = sentence_words(np.random.default_rng(0), 400_000, mu, sigma).mean()
        mu += np.log(mean / got)
    return float(mu)


def _last_of(lengths: np.ndarray) -> np.ndarray:
    mask = np.zeros(int(lengths.sum()), bool)
    mask[np.cumsum(lengths) - 1] = True
    return mask


def _insert_after(ids: np.ndarray, glued: np.ndarray, lengths: np.ndarray, where: np.ndarray,
                  new_ids: np.ndarray, new_glued: bool) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Insert ``new_ids`` (one per True of ``where``, in order) right after those tokens."""
    at = np.flatnonzero(where) + 1
    out_ids = np.insert(ids, at, new_ids)
    out_glued = np.insert(glued, at, new_glued)
    sentence = np.repeat(np.arange(lengths.size), lengths)
    added = np.bincount(sentence[where], minlength=lengths.size)
    return out_ids, out_glued, lengths + added
