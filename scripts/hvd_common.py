"""Shared by the Horovod study scripts (accumulation_study.py, throughput_report.py): config,
real token batches for this rank, and reading the ranks' JSON files back.

Imported from the scripts' own directory (``python scripts/<script>.py`` puts it on sys.path).
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tf_nmt.config import Config, load_config, preset  # noqa: E402


def study_config(preset_name: str, overrides: Sequence[str], batch_tokens: int) -> Config:
    """The preset with ``--set`` overrides and the study's token budget per batch and rank."""
    cfg = load_config(None, list(overrides), base=preset(preset_name))
    cfg.data.batch_tokens = int(batch_tokens)
    return cfg


def rank_batches(cfg: Config, rank: int, size: int, steps: int, pairs_per_rank: int):
    """``steps`` real training batches of rank ``rank``: a seeded sample of the train split, the
    rank's shard of it, tokenised and batched by ``make_dataset`` (token budget, buckets).

    Returns (tokenizer, [(features, labels), ...]). Encoding only a sample keeps the start-up of
    oversubscribed ranks short; the batches are built exactly as in training.
    """
    from tf_nmt.data.pipeline import encode_corpus, make_dataset  # noqa: PLC0415
    from tf_nmt.data.tokenizer import SubwordTokenizer  # noqa: PLC0415
    from tf_nmt.data.vocabulary import load_split, vocab_path  # noqa: PLC0415

    data_dir = Path(cfg.data.data_dir)
    vocab = vocab_path(data_dir, cfg.data.vocab_size)
    if not vocab.is_file():
        raise FileNotFoundError(f"no vocabulary {vocab}: run `tf-nmt prepare-data --data-dir "
                                f"{data_dir}` first")
    tokenizer = SubwordTokenizer.load(vocab)
    pairs = load_split(data_dir, "train")
    order = list(range(len(pairs)))
    random.Random(cfg.data.shuffle_seed).shuffle(order)
    sample = [pairs[i] for i in order[:pairs_per_rank * size]][rank::size]
    corpus = encode_corpus(sample, tokenizer)
    ds = make_dataset(corpus, cfg.data.batch_tokens, cfg.data.max_length, shuffle=True,
                      repeat=True, seed=cfg.data.shuffle_seed + rank)
    return tokenizer, list(ds.take(steps))


def batch_tokens(features, labels) -> Dict[str, int]:
    """Padded and real (non-pad) token counts of one batch."""
    import numpy as np  # noqa: PLC0415

    src, tgt = features["source"].numpy(), labels.numpy()
    return {"sentences": int(src.shape[0]), "source_padded": int(src.size),
            "target_padded": int(tgt.size), "source_tokens": int(np.count_nonzero(src)),
            "target_tokens": int(np.count_nonzero(tgt))}


def read_ranks(out_dir: Path, size: int) -> List[dict]:
    """The ranks' ``rank<r>.json`` files, in rank order (error when one is missing)."""
    found = []
    for rank in range(size):
        path = Path(out_dir) / f"rank{rank}.json"
        if not path.is_file():
            raise RuntimeError(f"rank {rank} wrote no {path.name} in {out_dir}")
        found.append(json.loads(path.read_text()))
    return found


def write_json(path: Path, payload: dict, overwrite: bool) -> None:
    """Atomic JSON write; refuses to replace an existing file without ``overwrite``."""
    from tf_nmt.data.tokenizer import write_bytes_atomic  # noqa: PLC0415

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists: pass --overwrite to replace it")
    write_bytes_atomic(path, (json.dumps(payload, indent=2) + "\n").encode())


def parse_ranks(text: str) -> Tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4)."""
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or min(values) < 1:
        raise ValueError(f"rank counts must be positive integers, got {text!r}")
    return values
