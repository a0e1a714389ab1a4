"""A small own-corpus data directory (``corpus/manifest.json``, SentencePiece vocabulary, TFRecord
shards, cleaned dev/test text), written directly in the layout of :mod:`tf_nmt.data.prepared`
without running prepare-data, for the training, evaluation and export tests.

The pairs are short English/French sentences ("The file is new." -> "Le fichier est nouveau."),
so a model has something real to learn and BLEU something real to score.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from pathlib import Path
from typing import List, Optional, Tuple

from tf_nmt.compat import tf
from tf_nmt.data.prepared import MANIFEST_FORMAT, ShardInfo, encode_record
from tf_nmt.data.tokenizer import SubwordTokenizer, train_sentencepiece

# (English noun, French noun, article, feminine?)
NOUNS = [("house", "maison", "la", True), ("file", "fichier", "le", False),
         ("table", "table", "la", True), ("window", "fenêtre", "la", True),
         ("button", "bouton", "le", False), ("dog", "chien", "le", False),
         ("page", "page", "la", True), ("book", "livre", "le", False),
         ("tree", "arbre", "l'", False), ("menu", "menu", "le", False)]
# (English, French masculine, French feminine)
ADJECTIVES = [("big", "grand", "grande"), ("small", "petit", "petite"),
              ("new", "nouveau", "nouvelle"), ("old", "vieux", "vieille"),
              ("open", "ouvert", "ouverte"), ("empty", "vide", "vide")]


def _det(article: str, noun: str) -> str:
    return f"{article}{noun}" if article.endswith("'") else f"{article} {noun}"


def en_fr_pairs() -> List[Tuple[str, str]]:
    """80 distinct English/French sentence pairs."""
    pairs = []
    for (en_n, fr_n, art, fem), (en_a, fr_m, fr_f) in itertools.product(NOUNS, ADJECTIVES):
        pairs.append((f"The {en_n} is {en_a}.",
                      f"{_det(art, fr_n).capitalize()} est {fr_f if fem else fr_m}."))
    for en_n, fr_n, art, _fem in NOUNS:
        pairs.append((f"I see the {en_n}.", f"Je vois {_det(art, fr_n)}."))
        pairs.append((f"Where is the {en_n}?", f"Où est {_det(art, fr_n)} ?"))
    return pairs


def write_own_corpus(root: Path, src_lang: str = "en", tgt_lang: str = "fr", num_shards: int = 4,
                     repeats: int = 3, with_test: bool = True, vocab_size: int = 320,
                     spm_proto: Optional[bytes] = None) -> Path:
    """Write an own-corpus data dir at ``root``: the train pairs (``en_fr_pairs() * repeats``,
    swapped when ``src_lang`` is ``fr``) round-robin over ``num_shards`` shards; dev and (with
    ``with_test``) test text; the vocabulary ``spm_proto`` (None: learned here from the pairs).
    Returns ``root``."""
    pairs = en_fr_pairs()
    if src_lang == "fr":
        pairs = [(f, e) for e, f in pairs]
    train, dev, test = pairs * repeats, pairs[::8], pairs[3::8]
    root = Path(root)
    corpus, vocab, shards = root / "corpus", root / "vocab", root / "shards"
    for d in (corpus, vocab, shards):
        d.mkdir(parents=True, exist_ok=True)
    if spm_proto is None:
        spm_proto = train_sentencepiece([s for pair in pairs for s in pair], vocab_size)
    vocab_rel = f"vocab/spm-{vocab_size}.model"
    (root / vocab_rel).write_bytes(spm_proto)
    tokenizer = SubwordTokenizer(spm_proto)

    texts = {"dev": dev, **({"test": test} if with_test else {})}
    for split, items in texts.items():
        (corpus / f"{split}.{src_lang}").write_text("".join(s + "\n" for s, _ in items), "utf-8")
        (corpus / f"{split}.{tgt_lang}").write_text("".join(t + "\n" for _, t in items), "utf-8")

    src_ids = tokenizer.encode([s for s, _ in train])
    tgt_ids = tokenizer.encode([t for _, t in train])
    infos = []
    for k in range(num_shards):
        name = f"train-{k:05d}-of-{num_shards:05d}.tfrecord"
        rows = list(range(k, len(train), num_shards))
        with tf.io.TFRecordWriter(str(shards / name)) as writer:
            for i in rows:
                writer.write(encode_record(src_ids[i], tgt_ids[i]))
        infos.append(ShardInfo(name=name, pairs=len(rows), bytes=(shards / name).stat().st_size,
                               src_tokens=sum(len(src_ids[i]) for i in rows),
                               tgt_tokens=sum(len(tgt_ids[i]) for i in rows)))

    splits = {"train": {"pairs": len(train), "origin": "files"},
              "dev": {"pairs": len(dev), "origin": "files"}}
    if with_test:
        splits["test"] = {"pairs": len(test), "origin": "files"}
    manifest = {
        "format": MANIFEST_FORMAT, "name": "own", "src_lang": src_lang, "tgt_lang": tgt_lang,
        "splits": splits,
        "cleaning": {split: {"read": info["pairs"], "empty": 0, "too_long": 0, "ratio": 0,
                             "duplicates": 0, "overlap": 0, "kept": info["pairs"]}
                     for split, info in splits.items()},
        "vocab": {"path": vocab_rel, "size": vocab_size, "type": "unigram",
                  "sample_sentences": 2 * len(pairs), "fingerprint": tokenizer.fingerprint,
                  "source": "train"},
        "shards": {"count": num_shards, "files": [asdict(i) for i in infos]},
        "inputs": {}, "params": {"seed": 1234}, "timings": {},
    }
    (corpus / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return root


def shard_pairs(root: Path) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """Every (source ids, target ids) record of ``root``'s shards, read on the Python side."""
    from tf_nmt.data.prepared import decode_record, read_prepared

    out = []
    for path in read_prepared(root).shard_paths():
        for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            src, tgt = decode_record(record)
            out.append((tuple(src), tuple(tgt)))
    return out
