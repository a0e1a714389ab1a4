"""What one encoding worker process does: a bucket of text pairs -> shuffled shard records.

Imported by the worker processes, so it imports only the standard library, sentencepiece and
:mod:`tf_nmt.data.prepared` (no TensorFlow): a worker starts fast and holds one bucket at a
time. Python sentencepiece gives the ids tensorflow-text gives for the same model (checked on a
sample by :func:`tf_nmt.data.own_corpus.vocab.check_same_ids`).
"""
from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from tf_nmt.data.prepared import encode_record

_WORKER: Dict[str, Any] = {}


def init(model_proto: bytes, heldout_sources: Iterable[str],
         source_proto: Optional[bytes] = None) -> None:
    """Load the vocabulary (``source_proto``: the sources' own, separate vocabularies) and the
    held-out sources (train pairs with such a source are dropped)."""
    import sentencepiece as spm

    _WORKER["sp"] = spm.SentencePieceProcessor(model_proto=model_proto)
    _WORKER["source_sp"] = (_WORKER["sp"] if source_proto is None else
                            spm.SentencePieceProcessor(model_proto=source_proto))
    _WORKER["heldout"] = set(heldout_sources)


def shard_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def encode_bucket(task: Tuple[int, str, int]) -> Dict[str, Any]:
    """Bucket ``index`` (file ``path``): exact duplicates and held-out overlaps dropped (counted),
    the rest encoded and permuted with the seed; returns the records and counts."""
    index, path, seed = task
    sp, source_sp, heldout = _WORKER["sp"], _WORKER["source_sp"], _WORKER["heldout"]
    seen, sources, targets = set(), [], []
    duplicates = overlap = 0
    for line in Path(path).read_bytes().splitlines():
        if line in seen:
            duplicates += 1
            continue
        seen.add(line)
        src, tgt = line.decode("utf-8").split("\t")
        if src in heldout:
            overlap += 1
            continue
        sources.append(src)
        targets.append(tgt)
    del seen
    src_ids = source_sp.encode(sources, out_type=int, num_threads=1) if sources else []
    tgt_ids = sp.encode(targets, out_type=int, num_threads=1) if targets else []
    order = list(range(len(sources)))
    random.Random(shard_seed(seed, index)).shuffle(order)
    return {"index": index, "records": [encode_record(src_ids[i], tgt_ids[i]) for i in order],
            "duplicates": duplicates, "overlap": overlap, "kept": len(order),
            "src_tokens": sum(map(len, src_ids)), "tgt_tokens": sum(map(len, tgt_ids))}


def heavy_modules() -> list:
    """The heavy modules this process has imported (a worker should have none)."""
    return sorted(m for m in ("tensorflow", "tensorflow_text", "keras", "tf_keras") if m in sys.modules)
