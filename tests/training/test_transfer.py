"""Transfer learning as initialisation: embedding row maps, weight copying, architecture checks, CLI."""
import json

import numpy as np
import pytest
import sentencepiece as spm

from tests.helpers import toy_pairs, write_toy_data_dir
from tf_nmt.compat import KERAS_VERSION, keras, tf
from tf_nmt.config import load_config
from tf_nmt.data.tokenizer import train_sentencepiece
from tf_nmt.models import build_model
from tf_nmt.run_dir import RunDir
from tf_nmt.training.checkpoints import make_manager
from tf_nmt.training.transfer import (SPECIAL_IDS, TransferError, embedding_row_map,
                                      initialize_from_parent, resolve_parent,
                                      transfer_weights, vocab_variables)

TINY = {"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32, "dropout": 0.0}
EXTRA = [(f"The {a} {n} sleeps.", f"Die {b} {m} schläft.")
         for a, b in [("quick", "schnelle"), ("green", "grüne"), ("lazy", "faule")]
         for n, m in [("cat", "Katze"), ("mouse", "Maus"), ("cow", "Kuh")]]


def child_pairs():
    """Toy pairs plus sentences with words the parent never saw (so some pieces are new)."""
    return toy_pairs() + EXTRA * 3


@pytest.fixture(scope="module")
def vocabs():
    parent = train_sentencepiece([s for p in toy_pairs() * 4 for s in p], 320)
    child = train_sentencepiece([s for p in child_pairs() * 4 for s in p], 340)
    return parent, child


def pieces(proto):
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return sp, [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def built(kind, vocab_size, seed, **hparams):
    keras.utils.set_random_seed(seed)
    model = build_model(kind, vocab_size, **hparams)
    model({"source": tf.ones([1, 4], tf.int32), "target_in": tf.ones([1, 4], tf.int32)})
    return model


def test_token_match_maps_identical_pieces_and_leaves_the_rest_unmapped(vocabs):
    parent, child = vocabs
    _, p_pieces = pieces(parent)
    _, c_pieces = pieces(child)
    assert len(p_pieces) != len(c_pieces)  # vocabularies of different size
    rows = embedding_row_map(parent, child, "token-match")
    assert rows.shape == (len(c_pieces),)
    index = {piece: i for i, piece in enumerate(p_pieces)}
    for i, piece in enumerate(c_pieces):
        assert rows[i] == index.get(piece, -1), piece
    assert 0 < (rows < 0).sum() < len(rows)  # some shared, some new pieces
    assert any(rows[i] != i for i in range(len(rows)) if rows[i] >= 0)  # ids really differ


def test_exclude_random_and_frequency_maps(vocabs):
    parent, child = vocabs
    p_sp, p_pieces = pieces(parent)
    c_sp, c_pieces = pieces(child)
    assert (embedding_row_map(parent, child, "exclude") == -1).all()

    rnd = embedding_row_map(parent, child, "random", seed=5)
    np.testing.assert_array_equal(rnd, embedding_row_map(parent, child, "random", seed=5))
    assert not np.array_equal(rnd, embedding_row_map(parent, child, "random", seed=6))
    assert list(rnd[:4]) == list(SPECIAL_IDS)
    ordinary = rnd[4:][rnd[4:] >= 0]
    assert len(ordinary) == min(len(c_pieces), len(p_pieces)) - 4
    assert len(set(ordinary.tolist())) == len(ordinary) and ordinary.min() >= 4  # a permutation

    freq = embedding_row_map(parent, child, "frequency")
    rank = lambda sp, n: sorted(range(4, n), key=lambda i: (-sp.get_score(i), i))  # noqa: E731
    for c, p in zip(rank(c_sp, len(c_pieces)), rank(p_sp, len(p_pieces))):
        assert freq[c] == p
    with pytest.raises(TransferError, match="unknown embedding strategy"):
        embedding_row_map(parent, child, "alphabetical")


def test_rows_copied_for_shared_tokens_rest_fresh_and_inner_layers_equal(vocabs):
    parent_proto, child_proto = vocabs
    rows = embedding_row_map(parent_proto, child_proto, "token-match")
    parent = built("transformer", pieces(parent_proto)[1].__len__(), seed=1, **TINY)
    child = built("transformer", len(rows), seed=2, **TINY)
    child_init = [w.numpy().copy() for w in child.weights]
    transfer_weights(parent, child, rows)

    vocab_ids = {id(v) for v in vocab_variables(child)}
    assert len(vocab_ids) == 2  # embedding matrix and output bias
    for p, c, init in zip(parent.weights, child.weights, child_init):
        if id(c) not in vocab_ids:
            np.testing.assert_array_equal(c.numpy(), p.numpy(), err_msg=c.name)
    emb_p = parent.embedding.embeddings.numpy()
    emb_c = child.embedding.embeddings.numpy()
    emb_init = child_init[[id(w) for w in child.weights].index(id(child.embedding.embeddings))]
    for i, src in enumerate(rows):
        if src >= 0:
            np.testing.assert_array_equal(emb_c[i], emb_p[src])
        else:
            np.testing.assert_array_equal(emb_c[i], emb_init[i])  # the child's own init
            assert not any(np.array_equal(emb_c[i], row) for row in emb_p)


def test_mismatched_architectures_are_refused_with_the_variable_named(vocabs):
    parent_proto, child_proto = vocabs
    rows = embedding_row_map(parent_proto, child_proto, "token-match")
    parent = built("transformer", 316, seed=1, **TINY)
    wider = built("transformer", len(rows), seed=2, **{**TINY, "ff_dim": 48})
    before = [w.numpy().copy() for w in wider.weights]
    with pytest.raises(TransferError, match=r"encoder_0/ffn/inner/kernel.*\[16, 32\].*\[16, 48\]"):
        transfer_weights(parent, wider, rows)
    deeper = built("transformer", len(rows), seed=2, **{**TINY, "num_layers": 2})
    with pytest.raises(TransferError, match="architectures differ"):
        transfer_weights(parent, deeper, rows)
    for w, b in zip(wider.weights, before):  # nothing was half-copied
        np.testing.assert_array_equal(w.numpy(), b)


def _fake_parent_run(root, proto, kind, hparams, seed=1):
    """A run directory holding a checkpoint of an (untrained) model: what --init-from reads."""
    run = RunDir(root)
    run.root.mkdir(parents=True)
    cfg = load_config(None, [f"model.kind={kind}"] + [f"model.{k}={v}" for k, v in hparams.items()])
    cfg.save(run.config_path)
    run.vocab_path.write_bytes(proto)
    run.write_meta({"model_kind": kind, "keras": KERAS_VERSION})  # trained on this process's Keras
    model = built(kind, spm.SentencePieceProcessor(model_proto=proto).get_piece_size(), seed, **hparams)
    prefix = make_manager(tf.train.Checkpoint(model=model), run.checkpoints, 1).save(checkpoint_number=7)
    return model, prefix


def test_parent_resolved_from_run_dir_or_prefix_and_kind_checked(vocabs, tmp_path):
    parent_proto, child_proto = vocabs
    parent, prefix = _fake_parent_run(tmp_path / "parent", parent_proto, "transformer", TINY)
    assert resolve_parent(str(tmp_path / "parent")).checkpoint == prefix
    assert resolve_parent(prefix).run_dir == tmp_path / "parent"
    with pytest.raises(TransferError, match="neither a run directory"):
        resolve_parent(str(tmp_path / "nowhere"))

    child = built("transformer", pieces(child_proto)[1].__len__(), seed=3, **TINY)
    report = initialize_from_parent(child, child_proto, "transformer", TINY, prefix, "token-match",
                                    log=lambda _m: None)
    assert report.copied_variables == len(child.weights) and report.parent_vocab_size == 316
    np.testing.assert_array_equal(child.weights[-1].numpy(), parent.weights[-1].numpy())

    lstm = {"num_layers": 2, "units": 16}
    gnmt = built("gnmt", pieces(child_proto)[1].__len__(), seed=3, **lstm)
    with pytest.raises(TransferError, match="is a transformer model but this run trains a gnmt"):
        initialize_from_parent(gnmt, child_proto, "gnmt", lstm, prefix, "token-match")


def _first_step(output):
    """loss and lr of the first progress line (``step 1/N | loss X | lr Y | ...``)."""
    line = next(line for line in output.splitlines() if line.lstrip().startswith("step"))
    fields = dict(part.strip().split(" ", 1) for part in line.split("|")[1:3])
    return {"loss": float(fields["loss"]), "lr": float(fields["lr"])}


def _child_data_dir(root):
    """Toy data whose training text adds new words: a different (and larger) vocabulary."""
    data = write_toy_data_dir(root)
    pairs = child_pairs() * 4
    (data / "corpus" / "train.en").write_text("\n".join(e for e, _ in pairs) + "\n", encoding="utf-8")
    (data / "corpus" / "train.de").write_text("\n".join(d for _, d in pairs) + "\n", encoding="utf-8")
    return data


@pytest.mark.slow
def test_cli_trains_a_child_from_a_parent_end_to_end(tmp_path, capsys):
    from tf_nmt.cli import main
    from tf_nmt.run_dir import load_trained_model

    common = ["--set", "model.num_layers=1", "--set", "model.d_model=32", "--set", "model.num_heads=2",
              "--set", "model.ff_dim=64", "--set", "model.dropout=0.0", "--set", "data.batch_tokens=256",
              "--set", "train.peak_lr=0.003", "--set", "train.warmup_steps=20", "--set", "train.seed=7",
              "--set", "train.log_every=1", "--set", "train.steps_per_cycle=5"]
    parent_data = write_toy_data_dir(tmp_path / "pdata")
    child_data = _child_data_dir(tmp_path / "cdata")
    parent_run, child_run, scratch_run = tmp_path / "parent", tmp_path / "child", tmp_path / "scratch"
    assert main(["train", "--run-dir", str(parent_run), "--data-dir", str(parent_data), *common,
                 "--set", "data.vocab_size=320", "--set", "train.train_steps=40"]) == 0
    child_args = ["--data-dir", str(child_data), *common, "--set", "data.vocab_size=340",
                  "--set", "train.train_steps=5"]
    capsys.readouterr()
    assert main(["train", "--run-dir", str(child_run), *child_args, "--init-from", str(parent_run),
                 "--embeddings", "token-match", "--no-warmup"]) == 0
    child_out = capsys.readouterr().out
    assert main(["train", "--run-dir", str(scratch_run), *child_args]) == 0
    scratch_out = capsys.readouterr().out
    assert "initialised from" in child_out and "initialised from" not in scratch_out

    record = json.loads((child_run / "init_from.json").read_text())
    assert record["strategy"] == "token-match" and record["parent_vocab_size"] == 316
    assert 0 < record["mapped_rows"] < record["child_vocab_size"] == 331
    child_first, scratch_first = _first_step(child_out), _first_step(scratch_out)
    assert child_first["lr"] == pytest.approx(0.003)  # --no-warmup: peak LR from the first step
    assert scratch_first["lr"] < 0.001  # warm-up ramp
    # The child starts from a trained parent: its first loss is far below training from scratch.
    assert child_first["loss"] < 0.8 * scratch_first["loss"]
    child_model, _, _ = load_trained_model(child_run)
    parent_model, _, _ = load_trained_model(parent_run)
    assert parent_model.embedding.embeddings.shape[0] == 316
    assert child_model.embedding.embeddings.shape[0] == 331

    # A parent of another shape is refused with one clear line, before anything is written.
    bad_run = tmp_path / "wider"
    assert main(["train", "--run-dir", str(bad_run), *child_args, "--set", "model.ff_dim=48",
                 "--init-from", str(parent_run)]) == 2
    err = capsys.readouterr().err
    assert "tf-nmt: error:" in err and "encoder_0/ffn/inner/kernel" in err and not bad_run.exists()

    # Resuming the child never re-initialises it (the parent may even be gone).
    import shutil
    shutil.rmtree(parent_run)
    assert main(["train", "--run-dir", str(child_run), *child_args[:-1], "train.train_steps=7",
                 "--init-from", str(parent_run)]) == 0
    assert "resuming from step 5" in capsys.readouterr().out

    with pytest.raises(SystemExit):
        main(["train", "--run-dir", str(tmp_path / "bad"), *child_args, "--embeddings", "nope"])
