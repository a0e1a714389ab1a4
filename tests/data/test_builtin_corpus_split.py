"""Dedup, entry-disjoint dev/test selection and leak removal."""
from collections import Counter

from tf_nmt.data.builtin_corpus.builder import clean_and_dedupe
from tf_nmt.data.builtin_corpus.normalize import match_key
from tf_nmt.data.builtin_corpus.pairs import Pair
from tf_nmt.data.builtin_corpus.split import split_pairs


def _ding(n_groups: int = 40, per_group: int = 3):
    return [Pair(f"Sentence {g} number {i}.", f"Satz {g} Nummer {i}.", "ding", f"ding:{g}")
            for g in range(n_groups) for i in range(per_group)]


def test_dedupe_after_normalisation():
    filtered = Counter()
    pairs = [Pair("The  house.", "Das Haus.", "ding", "a"), Pair("The house.", "Das  Haus.", "lo_ui", "b"),
             Pair("Same", "Same", "gcc", "c")]
    kept = clean_and_dedupe(pairs, filtered)
    assert [(p.en, p.de, p.source) for p in kept] == [("The house.", "Das Haus.", "ding")]
    assert filtered == Counter({"duplicate": 1, "untranslated": 1})


def test_split_is_disjoint_by_entry_and_deterministic():
    pairs = _ding() + [Pair("Open file", "Datei öffnen", "lo_ui", "lo_ui:x")]
    first = split_pairs(pairs, dev_size=10, test_size=20, seed=7)
    again = split_pairs(pairs, dev_size=10, test_size=20, seed=7)
    assert first["test"] == again["test"] and first["dev"] == again["dev"]
    groups = {s: {p.group for p in first[s]} for s in ("train", "dev", "test")}
    assert not groups["train"] & groups["dev"] and not groups["train"] & groups["test"]
    assert not groups["dev"] & groups["test"]
    assert 20 <= len(first["test"]) < 23 and 10 <= len(first["dev"]) < 13
    assert all(p.source == "ding" for p in first["dev"] + first["test"])
    assert len(first["train"]) + len(first["dev"]) + len(first["test"]) == len(pairs)
    other = split_pairs(pairs, dev_size=10, test_size=20, seed=8)
    assert {p.group for p in other["test"]} != groups["test"]


def test_train_never_shares_a_side_with_dev_or_test():
    pairs = _ding()
    probe = split_pairs(pairs, dev_size=6, test_size=6, seed=1)
    held = probe["test"][0]
    leaks = [Pair(held.en.upper(), "Etwas ganz anderes.", "lo_help", "lo_help:1"),
             Pair("Something else entirely.", held.de, "gnome", "gnome:1")]
    result = split_pairs(pairs + leaks, dev_size=6, test_size=6, seed=1)
    held_keys = {match_key(s) for p in result["dev"] + result["test"] for s in (p.en, p.de)}
    assert not any(match_key(p.en) in held_keys or match_key(p.de) in held_keys for p in result["train"])
    assert result["removed"]["train_overlapping_eval"] == 2


def test_slash_alternatives_are_not_held_out():
    pairs = [Pair(f"The town/city {g} is small.", f"Die Stadt {g} ist klein.", "ding", f"ding:{g}")
             for g in range(5)]
    result = split_pairs(pairs, dev_size=1, test_size=1, seed=0)
    assert result["dev"] == [] and result["test"] == []
