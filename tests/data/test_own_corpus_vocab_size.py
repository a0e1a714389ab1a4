"""The vocabulary says what it is (issue 55): a learned vocabulary is named, recorded and reported
by the pieces it has; fewer pieces than ``--vocab-size`` asks (SentencePiece stops where the
sample gives no more) is refused in one line naming the most it gives, unless
``--allow-smaller-vocab``, and then one line says so and the manifest records both numbers."""
import json

import pytest

from tests.data.test_own_corpus_prepare import error_line, make_pairs, prepare, write_plain
from tf_nmt.config import ConfigError
from tf_nmt.data.data_dir import prepared_vocab
from tf_nmt.data.prepared import manifest_path, read_prepared


@pytest.fixture()
def small(tmp_path):
    """200 pairs: far too few for 8,000 pieces."""
    return write_plain(tmp_path / "train", make_pairs(200))


def test_too_large_a_vocabulary_is_refused_then_kept_with_the_flag(small, tmp_path, capsys):
    data = tmp_path / "data"
    flags = ["--train-src", small[0], "--train-tgt", small[1], "--dev-size", "20",
             "--vocab-size", "8000"]
    err = error_line(prepare(data, *flags), capsys)
    most = int(err.split("at most ")[1].split(" pieces")[0].replace(",", ""))
    assert 300 < most < 8000 and f"re-run with --vocab-size {most}," in err
    assert "--allow-smaller-vocab" in err and not data.exists()

    assert prepare(data, *flags, "--allow-smaller-vocab") == 0  # resumes the passes done
    out = capsys.readouterr().out
    assert "validate, heldout: done by an earlier run, skipped" in out
    said = [line for line in out.splitlines() if "fewer than the 8,000 asked" in line]
    assert len(said) == 1 and f"learned {most:,} pieces" in said[0]
    assert f"vocabulary of {most:,} pieces (8,000 asked)" in out.splitlines()[-1]
    vocab = json.loads(manifest_path(data).read_text())["vocab"]
    assert (vocab["size"], vocab["pieces"], vocab["requested"]) == (most, most, 8000)
    assert vocab["path"] == f"vocab/spm-{most}.model" and (data / vocab["path"]).is_file()
    prepared = read_prepared(data)
    assert prepared.vocab_size == most == prepared_vocab(prepared).vocab_size
    with pytest.raises(ConfigError, match=f"data.vocab_size=8000.*a {most}-piece vocabulary"):
        prepared_vocab(prepared, 8000)  # what train says when the config asks for 8000


def test_a_manifest_that_records_the_asked_size_is_read_as_its_pieces(small, tmp_path, capsys):
    data = tmp_path / "data"
    assert prepare(data, "--train-src", small[0], "--train-tgt", small[1], "--dev-size", "20",
                   "--vocab-size", "8000", "--allow-smaller-vocab") == 0
    path = manifest_path(data)
    manifest = json.loads(path.read_text())
    pieces = manifest["vocab"]["pieces"]
    manifest["vocab"]["size"] = 8000  # as prepare-data wrote it before issue 55
    path.write_text(json.dumps(manifest))
    assert read_prepared(data).vocab_size == pieces


def test_a_separate_side_too_large_is_refused_naming_its_flag(small, tmp_path, capsys):
    err = error_line(prepare(tmp_path / "data", "--train-src", small[0], "--train-tgt", small[1],
                             "--dev-size", "20", "--separate-vocab", "--src-vocab-size", "8000"),
                     capsys)  # the target side takes --vocab-size 300
    assert "source vocabulary of at most" in err and "--src-vocab-size 8000" not in err
    assert "that --src-vocab-size asks: re-run with --src-vocab-size " in err


def test_the_flag_would_be_ignored_with_a_users_model(small, tmp_path, capsys):
    model = tmp_path / "user.model"
    model.write_bytes(b"")
    err = error_line(prepare(tmp_path / "data", "--train-src", small[0], "--train-tgt", small[1],
                             "--spm-model", model, "--allow-smaller-vocab"), capsys)
    assert "--allow-smaller-vocab" in err and "would be ignored" in err
