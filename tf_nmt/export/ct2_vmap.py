"""A lexical shortlist for CTranslate2's vocabulary mapping (``use_vmap``), built from the
training pairs.

CTranslate2 can restrict the output layer of each batch to the union of candidate target pieces
of the batch's source pieces (plus ``<unk>``, ``<s>``, ``</s>`` and the always-on list): the
output projection, softmax and top-k then cost the shortlist's size instead of the vocabulary's.
The map is Marian's shortlist idea without an aligner: for every source piece, the ``per_source``
target pieces with the highest sentence-level co-occurrence share ``c(s, t) / c(s)`` (pairs
whose target contains ``t`` among those whose source contains ``s``), excluding the
``always`` most frequent target pieces, which are candidates for every batch.

File format (CTranslate2's ``vmap.txt``): ``source_piece<TAB>target pieces...``; the line
with an empty source holds the always-on pieces.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

#: Default always-on list and candidates per source piece, measured on the quickstart model
#: (test BLEU at beam 4: int8 8.92 against 8.96 without a map, float32 8.77 against 8.80;
#: 300/40 cost int8 0.36 BLEU), see docs/serving.md.
ALWAYS = 1000
PER_SOURCE = 100
#: Sentences counted per chunk (bounds the co-occurrence keys held at once).
CHUNK = 20_000
#: Whether ``tf-nmt export --format ctranslate2`` writes a map without ``--vmap`` (translate
#: uses an export's map unless ``--no-vmap``). Off: on 1,000 sentences of a 32k-piece model of
#: the generated corpus it cost no BLEU (+0.7) and gave 2.0-3.4x, but that corpus's target is a
#: lexical function of its source, and on real text (an 8k Debian model, 200 sentences) it
#: cost 0.21 (docs/serving.md; experiments/serving_speed/results/serving_engines_vmap32k.json).
VMAP_BY_DEFAULT = False
#: Shard pairs read from tf.data at once (split into pairs in numpy).
READ_BATCH = 4096
#: Training pairs read at most (the counts settle long before; bounds export time).
MAX_PAIRS = 1_000_000


def cooccurrence(pairs: Iterable[Tuple[Sequence[int], Sequence[int]]], source_size: int,
                 vocab_size: int) -> Tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sentence-level counts: ``(pairs, source_docs[S], target_tokens[V], keys, counts)`` where
    ``keys = s * V + t`` (sorted, unique) with ``counts`` the pairs containing both."""
    source_docs = np.zeros(source_size, np.int64)
    target_tokens = np.zeros(vocab_size, np.int64)
    keys = np.zeros(0, np.int64)  # the counts so far, merged after every chunk: memory grows
    counts = np.zeros(0, np.int64)  # with the distinct (source, target) pairs, not the corpus
    chunk: List[np.ndarray] = []

    def flush() -> None:
        nonlocal keys, counts
        if chunk:
            k, c = np.unique(np.concatenate(chunk), return_counts=True)
            keys, counts = merge_counts(keys, counts, k, c)
            chunk.clear()

    held = 0
    for src, tgt in pairs:
        s = np.unique(np.asarray(src, np.int64))
        t_all = np.asarray(tgt, np.int64)
        t = np.unique(t_all)
        source_docs[s] += 1
        np.add.at(target_tokens, t_all, 1)
        chunk.append((s[:, None] * vocab_size + t[None, :]).ravel())
        held += 1
        if held % CHUNK == 0:
            flush()
    flush()
    return held, source_docs, target_tokens, keys, counts


def merge_counts(keys: np.ndarray, counts: np.ndarray, new_keys: np.ndarray,
                 new_counts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Two sorted, unique key sets with their counts -> their union, counts added.

    Linear in the two sizes (a binary search per new key and one insertion pass), not a sort
    of their union: the held set reaches 10^8 keys at a 32k vocabulary and is merged once per
    chunk."""
    if not len(keys):
        return new_keys, new_counts
    pos = np.searchsorted(keys, new_keys)
    found = pos < len(keys)
    found[found] = keys[pos[found]] == new_keys[found]
    fresh = ~found
    union = np.insert(keys, pos[fresh], new_keys[fresh])
    union_counts = np.insert(counts, pos[fresh], new_counts[fresh])
    # a held key's index moves up by the fresh keys inserted before it (new keys are sorted)
    union_counts[pos[found] + np.cumsum(fresh)[found]] += new_counts[found]
    return union, union_counts


def build_vmap(pairs: Iterable[Tuple[Sequence[int], Sequence[int]]], tokens: Sequence[str],
               special_ids: Sequence[int], always: Optional[int] = None,
               per_source: Optional[int] = None,
               source_tokens: Optional[Sequence[str]] = None) -> Tuple[str, dict]:
    """The vmap text for ``pairs`` of (source ids, target ids): ``tokens`` the target pieces
    by id, ``source_tokens`` the source's (None: shared with the target); and a summary (pairs,
    always-on pieces, source pieces mapped, mean candidates). ``always`` and ``per_source``:
    None for :data:`ALWAYS` and :data:`PER_SOURCE`."""
    always = ALWAYS if always is None else always
    per_source = PER_SOURCE if per_source is None else per_source
    if always < 0 or per_source < 1:
        raise ValueError(f"always must be >= 0 and per_source >= 1 (got {always}, {per_source})")
    vocab = len(tokens)
    source_tokens = tokens if source_tokens is None else source_tokens
    seen, source_docs, target_tokens, keys, counts = cooccurrence(pairs, len(source_tokens), vocab)
    source_banned = np.zeros(len(source_tokens), bool)
    source_banned[list(special_ids)] = True
    banned = np.zeros(vocab, bool)
    banned[list(special_ids)] = True
    frequent = [int(i) for i in np.argsort(-target_tokens, kind="stable")
                if not banned[i] and target_tokens[i] > 0][:always]
    excluded = banned.copy()
    excluded[frequent] = True
    src_of, tgt_of = keys // vocab, keys % vocab
    keep = ~excluded[tgt_of] & ~source_banned[src_of]
    src_of, tgt_of, share = src_of[keep], tgt_of[keep], counts[keep] / source_docs[src_of[keep]]
    lines = ["\t" + " ".join(tokens[i] for i in frequent)]
    order = np.lexsort((tgt_of, -share, src_of))  # by source, best share first, then id
    src_of, tgt_of = src_of[order], tgt_of[order]
    bounds = np.flatnonzero(np.diff(src_of)) + 1
    mapped, total = 0, 0
    for group in np.split(np.arange(len(src_of)), bounds):
        if not len(group):
            continue
        chosen = tgt_of[group[:per_source]]
        source = source_tokens[int(src_of[group[0]])]
        lines.append(source + "\t" + " ".join(tokens[int(i)] for i in chosen))
        mapped += 1
        total += len(chosen)
    summary = {"pairs": seen,
               "always": len(frequent), "per_source": per_source, "source_pieces": mapped,
               "mean_candidates_per_source": total / max(mapped, 1)}
    return "\n".join(lines) + "\n", summary



def training_pairs(prepared, tokenizer, max_pairs: int = MAX_PAIRS
                   ) -> Iterator[Tuple[Sequence[int], Sequence[int]]]:
    """(source ids, target ids) of the first ``max_pairs`` training pairs of a prepared data
    directory (:class:`~tf_nmt.data.prepared.PreparedData`, checked by the caller to hold the
    run's vocabularies): an own corpus's shards (already ids, in file order), else the built-in
    corpus's train text encoded with ``tokenizer`` (the run's SentencePiece model, or its
    separate :class:`~tf_nmt.data.tokenizer.TokenizerPair`)."""
    if prepared.own and prepared.shards:
        from tf_nmt.data.streaming import read_pairs

        # ragged batches, split here: one pair at a time through tf.data costs ~0.4 ms each
        stream = read_pairs(prepared.shard_paths(), shuffle=False).take(max_pairs)
        for src, tgt in stream.ragged_batch(READ_BATCH):
            src_ids, src_rows = src.values.numpy(), src.row_splits.numpy()
            tgt_ids, tgt_rows = tgt.values.numpy(), tgt.row_splits.numpy()
            for i in range(len(src_rows) - 1):
                yield (src_ids[src_rows[i]:src_rows[i + 1]],
                       tgt_ids[tgt_rows[i]:tgt_rows[i + 1]])
        return
    from tf_nmt.data.data_dir import load_split

    source = getattr(tokenizer, "source", tokenizer)
    target = getattr(tokenizer, "target", tokenizer)
    pairs = load_split(prepared.root, "train")[:max_pairs]
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start:start + CHUNK]
        yield from zip(source.encode([s for s, _ in chunk]), target.encode([t for _, t in chunk]))
