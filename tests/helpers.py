"""Small, deterministic en-de material for unit tests (the real corpus is used by the e2e test)."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import List, Tuple

NOUNS = [("house", "Haus", "das"), ("file", "Datei", "die"), ("table", "Tabelle", "die"),
         ("window", "Fenster", "das"), ("button", "Knopf", "der"), ("dog", "Hund", "der"),
         ("page", "Seite", "die"), ("book", "Buch", "das"), ("tree", "Baum", "der"),
         ("menu", "Menü", "das")]
ADJECTIVES = [("big", "groß"), ("small", "klein"), ("new", "neu"), ("old", "alt"),
              ("open", "offen"), ("empty", "leer")]


def toy_pairs() -> List[Tuple[str, str]]:
    """60 grammatical English/German sentence pairs ("The file is new." → "Die Datei ist neu.")."""
    pairs = []
    for (en_n, de_n, art), (en_a, de_a) in itertools.product(NOUNS, ADJECTIVES):
        pairs.append((f"The {en_n} is {en_a}.", f"{art.capitalize()} {de_n} ist {de_a}."))
    return pairs


def write_toy_data_dir(root: Path, repeats: int = 4, reverse: bool = False) -> Path:
    """A prepared-data directory (``corpus/{train,dev,test}.{en,de}``) built from toy pairs
    (``reverse`` swaps the languages: same size, different text, so a different vocabulary)."""
    pairs = [(d, e) for e, d in toy_pairs()] if reverse else toy_pairs()
    splits = {"train": pairs * repeats, "dev": pairs[::6], "test": pairs[1::6]}
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for split, items in splits.items():
        (corpus / f"{split}.en").write_text("\n".join(e for e, _ in items) + "\n", encoding="utf-8")
        (corpus / f"{split}.de").write_text("\n".join(d for _, d in items) + "\n", encoding="utf-8")
    return root


def serve_fake_debs(monkeypatch, roots) -> None:
    """Make :mod:`tf_nmt.data.builtin_corpus.debian` find every package already unpacked at
    ``roots[package]`` (no apt, no network), for the corpus builders' tests."""
    from tf_nmt.data.builtin_corpus import debian

    monkeypatch.setattr(debian, "locate_debs", lambda pkgs, data_dir, debs_dir, log=print:
                        {p: Path(f"/fake/{p}_1_all.deb") for p in pkgs})
    monkeypatch.setattr(debian, "unpack_deb", lambda deb, target: roots[deb.name.split("_")[0]])


def read_lines(path: Path) -> List[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def train_tiny_own_run(data: Path, run: Path, steps: int = 60) -> List[str]:
    """``tf-nmt train`` of a tiny Transformer on the own corpus in ``data`` for ``steps``; its
    logged loss must fall by a fifth. Returns the ``--set`` arguments it trained with."""
    from tests.training.test_own_corpus import TINY
    from tf_nmt.cli import main

    settings = [arg for key in TINY + [f"train.train_steps={steps}", "train.log_every=10",
                                       "train.steps_per_cycle=30"] for arg in ("--set", key)]
    assert main(["train", "--data-dir", str(data), "--run-dir", str(run), *settings]) == 0
    progress = [json.loads(line) for line in (run / "progress.jsonl").read_text().splitlines()]
    losses = [p["loss"] for p in progress if "loss" in p]
    assert len(losses) >= 2 and losses[-1] < 0.8 * losses[0], losses
    return settings


def plain_sgd(learning_rate: float):
    """SGD of the Keras tf-nmt's models are built on (Keras 2's legacy class, which Horovod 0.28
    wraps, or Keras 3's), for tests that hand a bare optimizer to the comm layer."""
    from tf_nmt.training.optimizers import optimizer_classes  # noqa: PLC0415 - TensorFlow only where used

    return optimizer_classes().SGD(learning_rate)
