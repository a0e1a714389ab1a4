"""The transfer study's pure logic: the corpus parts, the child runs, the tiny setting."""
import argparse

import pytest

from experiments.transfer import study as transfer


def write_corpus(root, rows):
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for split, items in rows.items():
        (corpus / f"{split}.en").write_text("".join(f"{en}\n" for en, _, _ in items))
        (corpus / f"{split}.de").write_text("".join(f"{de}\n" for _, de, _ in items))
        (corpus / f"{split}.meta.tsv").write_text("".join(f"{src}\tg\n" for _, _, src in items))


def test_a_part_keeps_its_sources_train_pairs_and_all_of_dev_and_test(tmp_path):
    write_corpus(tmp_path / "data", {
        "train": [("a", "A", "ding"), ("b", "B", "gcc"), ("c", "C", "ding"), ("d", "D", "ding")],
        "dev": [("e", "E", "ding"), ("f", "F", "gcc")], "test": [("g", "G", "ding")]})
    counts = transfer.write_part(tmp_path / "data", tmp_path / "part", ["ding"], max_pairs=2)
    assert counts == {"train": 2, "dev": 2, "test": 1}
    assert (tmp_path / "part" / "corpus" / "train.de").read_text() == "A\nC\n"
    with pytest.raises(SystemExit, match="no train pairs"):
        transfer.write_part(tmp_path / "data", tmp_path / "none", ["lo_ui"], max_pairs=0)


def test_children_and_their_init_options():
    variants = transfer.child_variants(["token-match", "random"])
    assert variants == [("scratch", None, True), ("token-match", "token-match", True),
                        ("token-match+no-warmup", "token-match", False),
                        ("random", "random", True), ("random+no-warmup", "random", False)]
    assert transfer.child_args("p", None, True) == []
    assert transfer.child_args("p", "random", False) == ["--init-from", "p", "--embeddings",
                                                         "random", "--no-warmup"]
    assert transfer.steps_to([{"step": 20, "bleu": 0.2}, {"step": 40, "bleu": 0.7}], 0.5) == 40
    assert transfer.steps_to([{"step": 20, "bleu": 0.2}], 0.5) is None


def test_tiny_shrinks_the_run_and_keeps_user_overrides_last():
    args = transfer.build_parser().parse_args(["--tiny", "--set", "train.seed=5"])
    overrides = transfer.apply_tiny(args)
    assert overrides[-1] == "train.seed=5" and overrides[:-1] == transfer.TINY_SETTINGS
    assert (args.parent_steps, args.child_steps, args.eval_every) == (60, 40, 20)
    assert args.vocab_size == 1000 and args.max_train_pairs == 3000


def test_check_trained_refuses_a_run_of_other_length(tmp_path):
    with pytest.raises(SystemExit, match="trained 0 steps, not 40"):
        transfer.check_trained(tmp_path, 40)
    assert isinstance(transfer.build_parser(), argparse.ArgumentParser)
