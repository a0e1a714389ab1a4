"""The packed checkpoint file: exact round trip, atomic never-overwrite writes, and clear
refusals of truncated, corrupted, foreign or mismatched files."""
import json
import struct

import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt.compat import keras
from tf_nmt.quantization.packed_file import (MAGIC, PackedFileError, PackedModel, read_packed,
                                             write_packed)
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import assign_entries, quantize_model

RNG = np.random.default_rng(4)


def model(units=24):
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.layers.Dense(units), keras.layers.LayerNormalization(), keras.layers.Dense(5)])
    m.build([None, 9])
    return m


@pytest.mark.parametrize("bits", [1, 3, 4, 8])
def test_round_trip(tmp_path, bits):
    m = model()
    policy = QuantPolicy(bits=bits, kind="log", scale="max")
    packed = PackedModel(policy, quantize_model(m, policy), {"model": {"kind": "x"}}, b"vocab-bytes",
                         {"source_checkpoint": "ckpt-3"})
    size = write_packed(tmp_path / "m.tfq", packed)
    assert (tmp_path / "m.tfq").stat().st_size == size
    back = read_packed(tmp_path / "m.tfq")
    assert back.policy == policy and back.config == packed.config and back.vocab_proto == b"vocab-bytes"
    assert back.info == {"source_checkpoint": "ckpt-3"}
    for a, b in zip(packed.entries, back.entries):
        assert (a.name, a.shape, a.quantized, a.scale) == (b.name, b.shape, b.quantized, b.scale)
        np.testing.assert_array_equal(a.dequantize(policy), b.dequantize(policy))
    fresh = model()
    assign_entries(fresh, back.entries, back.policy)
    for w, e in zip(fresh.get_weights(), packed.entries):
        np.testing.assert_array_equal(w, e.dequantize(policy))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_four_bit_file_is_about_an_eighth(tmp_path):
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.layers.Dense(256, use_bias=False)])
    m.build([None, 256])
    policy = QuantPolicy(bits=4)
    size = write_packed(tmp_path / "m.tfq", PackedModel(policy, quantize_model(m, policy)))
    assert 256 * 256 / 2 <= size < 256 * 256 / 2 + 1024  # codes + a small header


def test_never_overwrites_without_flag(tmp_path):
    policy = QuantPolicy()
    packed = PackedModel(policy, quantize_model(model(), policy))
    path = tmp_path / "m.tfq"
    write_packed(path, packed)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="--overwrite"):
        write_packed(path, PackedModel(QuantPolicy(bits=8), quantize_model(model(), QuantPolicy(bits=8))))
    assert path.read_bytes() == before
    write_packed(path, packed, overwrite=True)


@pytest.fixture()
def good_file(tmp_path):
    policy = QuantPolicy()
    path = tmp_path / "m.tfq"
    write_packed(path, PackedModel(policy, quantize_model(model(), policy)))
    return path


@pytest.mark.parametrize("keep", [0, 5, 12, 40, -1, -300])
def test_truncated_file_is_refused(good_file, keep):
    data = good_file.read_bytes()
    good_file.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    with pytest.raises(PackedFileError, match="not a valid packed model"):
        read_packed(good_file)


def test_padded_corrupted_and_foreign_files_are_refused(good_file, tmp_path):
    data = good_file.read_bytes()
    good_file.write_bytes(data + b"\0")
    with pytest.raises(PackedFileError, match="truncated or padded"):
        read_packed(good_file)
    flipped = bytearray(data)
    flipped[-10] ^= 0x01
    good_file.write_bytes(bytes(flipped))
    with pytest.raises(PackedFileError, match="checksum mismatch"):
        read_packed(good_file)
    good_file.write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(PackedFileError, match="magic"):
        read_packed(good_file)
    (head_len,) = struct.unpack_from("<Q", data, len(MAGIC))
    header = json.loads(data[16:16 + head_len])
    header["version"] = 99
    head = json.dumps(header).encode()
    good_file.write_bytes(MAGIC + struct.pack("<Q", len(head)) + head + data[16 + head_len:])
    with pytest.raises(PackedFileError, match="version 99"):
        read_packed(good_file)
    with pytest.raises(FileNotFoundError):
        read_packed(tmp_path / "missing.tfq")


def test_mismatched_model_is_refused(good_file):
    packed = read_packed(good_file)
    with pytest.raises(ValueError, match="does not match model variable"):
        assign_entries(model(units=25), packed.entries, packed.policy)
    other = keras.Sequential([keras.layers.Dense(24)])
    other.build([None, 9])
    with pytest.raises(ValueError, match="2 variables"):
        assign_entries(other, packed.entries, packed.policy)


def test_a_separate_source_vocabulary_round_trips_and_a_shared_file_has_none(tmp_path):
    from tf_nmt.quantization.packed_file import decode_packed, encode_packed

    policy = QuantPolicy(bits=4, kind="log", scale="max")
    entries = quantize_model(model(), policy)
    shared = PackedModel(policy, entries, {}, b"target-vocab")
    assert b"source_vocab" not in encode_packed(shared)  # files of shared runs are unchanged
    assert decode_packed(encode_packed(shared)).source_vocab_proto == b""
    separate = PackedModel(policy, entries, {}, b"target-vocab", source_vocab_proto=b"src-vocab")
    write_packed(tmp_path / "s.tfq", separate)
    back = read_packed(tmp_path / "s.tfq")
    assert (back.vocab_proto, back.source_vocab_proto) == (b"target-vocab", b"src-vocab")
    data = bytearray((tmp_path / "s.tfq").read_bytes())
    data[-1] ^= 0xFF  # the source vocabulary is the payload's last chunk
    with pytest.raises(PackedFileError, match="checksum mismatch in source vocabulary"):
        decode_packed(bytes(data))
