"""read_parallel / read_tsv_parallel accept clean corpora and name file:line on errors."""
import pytest

from tf_nmt.data.builtin_corpus import CorpusError, read_parallel, read_tsv_parallel


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_reads_aligned_files(tmp_path):
    en = _write(tmp_path / "a.en", b"Hello\n\nWorld\r\n")
    de = _write(tmp_path / "a.de", "Hallo\n\nWelt\n".encode())
    assert read_parallel(en, de) == [("Hello", "Hallo"), ("World", "Welt")]


@pytest.mark.parametrize("en_bytes, de_bytes, bad, where", [
    (b"a\nb\n", b"x\n", "a.en", ":2:"),
    (b"a\n", b"x\ny\nz\n", "a.de", ":2:"),
    (b"a\n\xff\xfe\n", b"x\ny\n", "a.en", ":2:"),
    (b"a\nb\x00c\n", b"x\ny\n", "a.en", ":2:"),
    (b"a\nb\n", b"x\ny\tz\n", "a.de", ":2:"),
    (b"a\n\nc\n", b"x\ny\nz\n", "a.en", ":2:"),
    (b"a\nb\n", b"x\n \n", "a.de", ":2:"),
])
def test_malformed_inputs_name_file_and_line(tmp_path, en_bytes, de_bytes, bad, where):
    en, de = _write(tmp_path / "a.en", en_bytes), _write(tmp_path / "a.de", de_bytes)
    with pytest.raises(CorpusError) as info:
        read_parallel(en, de)
    assert f"{bad}{where}" in str(info.value)


def test_missing_and_empty_files(tmp_path):
    empty = _write(tmp_path / "e.en", b"\n")
    with pytest.raises(CorpusError, match="e.en: file is empty"):
        read_parallel(empty, empty)
    full = _write(tmp_path / "f.en", b"a\n")
    with pytest.raises(CorpusError, match="nope.de: file not found"):
        read_parallel(full, tmp_path / "nope.de")
    assert issubclass(CorpusError, ValueError)


def test_tsv_reader(tmp_path):
    good = _write(tmp_path / "g.tsv", "Hello\tHallo\n\nYes\tJa\n".encode())
    assert read_tsv_parallel(good) == [("Hello", "Hallo"), ("Yes", "Ja")]
    for data, message in [(b"a\tb\nc\n", "c.tsv:2: expected 2"), (b"a\tb\tc\n", "c.tsv:1: expected 2"),
                          (b"a\t\n", "c.tsv:1: empty target"), (b"a\t\xc3\n", "c.tsv:1: invalid UTF-8")]:
        with pytest.raises(CorpusError, match=message):
            read_tsv_parallel(_write(tmp_path / "c.tsv", data))
