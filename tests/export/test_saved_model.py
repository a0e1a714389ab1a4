"""SavedModel export: same translations as in-process, served from a fresh TF-only process,
written atomically and never silently overwritten."""
import pytest

pytestmark = pytest.mark.slow  # trains a tiny model first

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.compat import tf
from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
from tf_nmt.export.saved_model import export_saved_model
from tf_nmt.commands.quickstart import serve_in_fresh_process
from tf_nmt.run_dir import load_trained_model
from tf_nmt.training.trainer import train

TEXTS = ["The file is new.", "The dog is old.", "", "The window is empty."]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    data_dir = write_toy_data_dir(root / "data")
    run = root / "run"
    train(tiny_config(data_dir, "train.train_steps=40", "train.steps_per_cycle=20"), run, log=lambda _m: None)
    return run


def test_export_round_trip_in_a_fresh_process(trained_run, tmp_path):
    model, tokenizer, _ = load_trained_model(trained_run)
    expected = translate_texts(make_translate_fn(model, tokenizer, beam_size=2), tokenizer, TEXTS)
    export_dir = export_saved_model(model, tokenizer, tmp_path / "export", beam_size=2)
    loaded = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    here = [t.decode() for t in loaded(texts=tf.constant(TEXTS))["translations"].numpy()]
    assert here == expected
    assert serve_in_fresh_process(export_dir, TEXTS) == expected


def test_fresh_process_check_accepts_a_relative_path(trained_run, tmp_path, monkeypatch):
    model, tokenizer, _ = load_trained_model(trained_run)
    export_saved_model(model, tokenizer, tmp_path / "rel", beam_size=1)
    monkeypatch.chdir(tmp_path)
    assert len(serve_in_fresh_process("rel", TEXTS[:2])) == 2


def test_export_refuses_to_overwrite(trained_run, tmp_path):
    model, tokenizer, _ = load_trained_model(trained_run)
    target = tmp_path / "export"
    export_saved_model(model, tokenizer, target, beam_size=1)
    stamp = (target / "saved_model.pb").stat().st_mtime_ns
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_saved_model(model, tokenizer, target, beam_size=1)
    assert (target / "saved_model.pb").stat().st_mtime_ns == stamp
    export_saved_model(model, tokenizer, target, beam_size=1, overwrite=True)
    assert (target / "saved_model.pb").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_length_sorted_chunks_translate_as_the_plain_function_does(trained_run, tmp_path):
    """chunk_size: the batch is sorted by source length and decoded chunk by chunk; every
    sentence gets what the plain function gives its chunk, in the caller's order, in process
    and from the export."""
    from tf_nmt.inference.serving_graph import source_ids

    model, tokenizer, _ = load_trained_model(trained_run)
    texts = ["The window is empty and the dog is old.", "The file.", "", "The dog is old.",
             "The file is new and the window is empty.", "A", "The menu is new."]
    plain = make_translate_fn(model, tokenizer, beam_size=2)
    chunked = make_translate_fn(model, tokenizer, beam_size=2, chunk_size=3)
    lengths = [len(r) for r in tokenizer.encode(texts)]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])  # stable, as tf.argsort
    expected = [""] * len(texts)
    for start in range(0, len(order), 3):
        chunk = order[start:start + 3]
        for i, out in zip(chunk, plain(tf.constant([texts[i] for i in chunk])).numpy()):
            expected[i] = out.decode()
    got = [t.decode() for t in chunked(tf.constant(texts)).numpy()]
    assert got == expected
    assert chunked(tf.constant([], tf.string)).shape == (0,)
    assert source_ids(tokenizer, tf.constant(texts), 256).shape[0] == len(texts)
    export_dir = export_saved_model(model, tokenizer, tmp_path / "chunked", beam_size=2, chunk_size=3)
    served = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    assert [t.decode() for t in served(texts=tf.constant(texts))["translations"].numpy()] == expected
    with pytest.raises(ValueError, match="chunk_size"):
        make_translate_fn(model, tokenizer, chunk_size=-1)
