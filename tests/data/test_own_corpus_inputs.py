"""prepare-data's input files (tf_nmt.data.own_corpus.inputs): gzip, bzip2 and xz read by their
magic bytes whatever their names, zstd where the zstandard package is installed (else refused
by name), and compressed data that does not decompress is one error naming the file and the line
where reading stopped. Every file is made here, corrupt ones by changing real compressed bytes."""
from __future__ import annotations

import bz2
import gzip
import lzma
import sys
from pathlib import Path

import pytest

from tests.data.test_own_corpus_prepare import error_line, make_pairs, prepare
from tf_nmt.data.own_corpus.errors import OwnCorpusError
from tf_nmt.data.own_corpus.inputs import PairReader, Source, compression

PAIRS = make_pairs(50)
SRC = "".join(f"{s}\n" for s, _ in PAIRS).encode()
TGT = "".join(f"{t}\n" for _, t in PAIRS).encode()
TSV = "".join(f"{s}\t{t}\n" for s, t in PAIRS).encode()


def zstd_frame(data: bytes) -> bytes:
    """``data`` (under 256 bytes) as one zstd frame with one raw block, byte by byte after the
    format (RFC 8878): magic, a single-segment header with a 1-byte content size, a last raw
    block's 3-byte header. No compressor needed."""
    assert len(data) < 256
    block_header = (1 | (len(data) << 3)).to_bytes(3, "little")  # last block, raw, its size
    return b"\x28\xb5\x2f\xfd" + bytes([0x20, len(data)]) + block_header + data


def _read(tmp_path, src: bytes, tgt: bytes = None, names=("x.src", "x.tgt")):
    src_path = tmp_path / names[0]
    src_path.write_bytes(src)
    if tgt is None:
        return list(PairReader(Source(src_path)))
    tgt_path = tmp_path / names[1]
    tgt_path.write_bytes(tgt)
    return list(PairReader(Source(src_path, tgt_path)))


def _refused(tmp_path, src: bytes, tgt: bytes = None, names=("x.src", "x.tgt")) -> str:
    with pytest.raises(OwnCorpusError) as info:
        _read(tmp_path, src, tgt, names)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("compress, kind", [(gzip.compress, "gzip"), (bz2.compress, "bzip2"),
                                            (lzma.compress, "xz")])
def test_compressed_files_are_read_by_their_magic_bytes_not_their_names(tmp_path, compress, kind):
    assert compression(compress(SRC)[:10]) == kind
    # Named as if plain (or as another compression): the bytes decide.
    assert _read(tmp_path, compress(SRC), compress(TGT), names=("a.en", "a.fr.gz")) == PAIRS
    assert _read(tmp_path, compress(TSV), names=("pairs.tsv",)) == PAIRS
    assert _read(tmp_path, compress(SRC), TGT) == PAIRS  # one side compressed, one plain
    two_streams = compress(SRC[:100]) + compress(SRC[100:])  # as `cat a.gz b.gz` makes
    assert _read(tmp_path, two_streams, TGT) == PAIRS


def test_text_that_starts_like_a_bzip2_header_is_plain_text(tmp_path):
    text = b"BZh9 is a word\tBZh9 ist ein Wort\n"
    assert compression(text[:10]) is None
    assert _read(tmp_path, text) == [("BZh9 is a word", "BZh9 ist ein Wort")]


def test_a_corrupt_gzip_names_the_file_and_the_line_where_reading_stopped(tmp_path):
    # Two gzip members (as `cat` makes): lines 1-30, then lines 31-50 whose first deflate block
    # has its type bits flipped to the reserved 11: zlib.error "invalid block type".
    cut = SRC.index(PAIRS[30][0].encode())
    second = bytearray(gzip.compress(SRC[cut:]))
    second[10] |= 0x06
    message = _refused(tmp_path, gzip.compress(SRC[:cut]) + bytes(second), TGT,
                       names=("x.en.gz", "x.fr"))
    assert message.startswith(f"{tmp_path / 'x.en.gz'}:31: corrupt gzip data (Error -3 while "
                              "decompressing data: invalid block type)"), message
    assert "gzip -t" in message
    # A flipped checksum is found after the last line.
    data = bytearray(gzip.compress(TSV))
    data[-8] ^= 0xFF
    message = _refused(tmp_path, bytes(data), names=("x.tsv.gz",))
    assert message.startswith(f"{tmp_path / 'x.tsv.gz'}:51: corrupt gzip data (CRC check failed")


@pytest.mark.parametrize("compress, kind", [(bz2.compress, "bzip2"), (lzma.compress, "xz")])
def test_corrupt_or_truncated_bzip2_and_xz_are_one_line_naming_the_file(tmp_path, compress, kind):
    data = bytearray(compress(TSV))
    data[len(data) // 2] ^= 0xFF
    message = _refused(tmp_path, bytes(data), names=("x.tsv",))
    assert message.startswith(f"{tmp_path / 'x.tsv'}:1: corrupt {kind} data ("), message
    assert f"`{kind} -t`" in message
    # Cut short: an xz file without its 12-byte footer still yields its 50 lines first.
    message = _refused(tmp_path, bytes(compress(TSV)[:-12]), names=("x.tsv",))
    line = {"bzip2": 1, "xz": 51}[kind]
    assert f"x.tsv:{line}: corrupt {kind} data (Compressed file ended before the end-of-stream " \
           "marker was reached)" in message


def test_zstd_without_zstandard_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)  # `import zstandard` fails
    frame = zstd_frame(TSV[:200])
    assert compression(frame[:10]) == "zstd"
    message = _refused(tmp_path, frame, names=("pairs.tsv.zst",))
    assert message == (f"{tmp_path / 'pairs.tsv.zst'} is zstd-compressed; install zstandard or "
                       "decompress it (zstd -d)")
    # In a pair of files too, for either side.
    message = _refused(tmp_path, SRC, frame, names=("x.en", "x.fr"))
    assert message.startswith(f"{tmp_path / 'x.fr'} is zstd-compressed")


def test_zstd_is_read_where_zstandard_is_installed(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    lines = TSV.splitlines(keepends=True)
    assert _read(tmp_path, zstd_frame(b"".join(lines[:2])), names=("a.tsv",)) == PAIRS[:2]
    frames = zstd_frame(b"".join(lines[:2])) + zstandard.ZstdCompressor().compress(TSV[len(
        b"".join(lines[:2])):])  # two frames, as `cat a.zst b.zst` makes
    assert _read(tmp_path, frames, names=("a.tsv",)) == PAIRS
    whole = zstandard.ZstdCompressor(write_checksum=True).compress(TSV * 40)
    assert len(_read(tmp_path, whole, names=("a.tsv",))) == 2000
    message = _refused(tmp_path, whole[: len(whole) // 2], names=("a.tsv",))
    assert "a.tsv:" in message
    assert "corrupt zstd data (truncated: the file ends inside a frame)" in message
    broken = bytearray(whole)
    broken[len(broken) // 2] ^= 0xFF
    assert "corrupt zstd data" in _refused(tmp_path, bytes(broken), names=("a.tsv",))


def test_prepare_data_reads_bzip2_and_xz_and_refuses_a_corrupt_gzip_in_one_line(tmp_path, capsys):
    pairs = make_pairs(320)
    src = "".join(f"{s}\n" for s, _ in pairs).encode()
    tgt = "".join(f"{t}\n" for _, t in pairs).encode()
    (tmp_path / "a.en.bz2").write_bytes(bz2.compress(src))
    (tmp_path / "a.fr.xz").write_bytes(lzma.compress(tgt))
    data = tmp_path / "data"
    assert prepare(data, "--train-src", tmp_path / "a.en.bz2", "--train-tgt",
                   tmp_path / "a.fr.xz", "--dev-size", "20") == 0
    from tf_nmt.data.prepared import read_prepared

    assert read_prepared(data).manifest["splits"]["train"]["pairs"] == 300
    capsys.readouterr()

    cut = tgt.index(pairs[199][1].encode())
    second = bytearray(gzip.compress(tgt[cut:]))
    second[10] |= 0x06
    (tmp_path / "b.fr.gz").write_bytes(gzip.compress(tgt[:cut]) + bytes(second))
    (tmp_path / "b.en").write_bytes(src)
    err = error_line(prepare(tmp_path / "data2", "--train-src", tmp_path / "b.en", "--train-tgt",
                             tmp_path / "b.fr.gz", "--dev-size", "20"), capsys)
    assert f"b.fr.gz:200: corrupt gzip data (Error -3 while decompressing data" in err
    assert not (tmp_path / "data2").exists()
