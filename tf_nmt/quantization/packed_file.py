"""The packed B-bit checkpoint: one self-describing file with every tensor of a model.

Layout::

    b"TFNMTQ1\\n"                      8-byte magic
    uint64 little-endian              length of the header
    header                            UTF-8 JSON (below)
    payload                           the tensors' bytes, back to back

The header records the format version, the quantisation policy (bits, kind, scale mode, whether
biases are quantised), the run's config and vocabulary (so the file alone can be exported; a
separate-vocabulary run adds ``source_vocab``, the source's), and per
tensor: name, shape, encoding (``packed``: B-bit codes, see :mod:`tf_nmt.quantization.packing`,
plus a float32 scale; ``float32``: raw little-endian values), offset, byte count and SHA-256.
Files are written to a temporary sibling and renamed into place, and never replace an existing
file unless ``overwrite``. Reading checks the magic, the header, the exact payload length and each
checksum, so a truncated, corrupted or foreign file is refused with :class:`PackedFileError`.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from tf_nmt.errors import UserError
from tf_nmt.utils.io import write_bytes_atomic

from tf_nmt.quantization.packing import pack_codes, packed_size, unpack_codes
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import TensorEntry

MAGIC = b"TFNMTQ1\n"
VERSION = 1
_LEN = struct.Struct("<Q")
_MAX_HEADER = 64 << 20


class PackedFileError(UserError, ValueError):
    """A packed model file that is truncated, corrupted, of another format, or for another model."""


@dataclass
class PackedModel:
    policy: QuantPolicy
    entries: List[TensorEntry]
    config: Dict[str, Any] = field(default_factory=dict)
    vocab_proto: bytes = b""
    info: Dict[str, Any] = field(default_factory=dict)  # free-form provenance (source checkpoint, ...)
    source_vocab_proto: bytes = b""  # separate vocabularies only (vocab_proto: the target's)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tensor_bytes(entry: TensorEntry, bits: int) -> bytes:
    if entry.quantized:
        return pack_codes(entry.codes.astype(np.uint8).ravel(), bits).tobytes()
    return np.ascontiguousarray(entry.values, dtype="<f4").tobytes()


def encode_packed(packed: PackedModel) -> bytes:
    """The file's bytes."""
    bits = packed.policy.bits
    chunks: List[bytes] = []
    offset = 0
    tensors = []
    for e in packed.entries:
        data = _tensor_bytes(e, bits)
        tensors.append({"name": e.name, "shape": list(e.shape),
                        "encoding": "packed" if e.quantized else "float32",
                        "scale": e.scale if e.quantized else None,
                        "offset": offset, "nbytes": len(data), "sha256": _sha(data)})
        chunks.append(data)
        offset += len(data)
    vocab = {"offset": offset, "nbytes": len(packed.vocab_proto), "sha256": _sha(packed.vocab_proto)}
    chunks.append(packed.vocab_proto)
    offset += len(packed.vocab_proto)
    header = {"format": "tf-nmt-packed", "version": VERSION, "policy": packed.policy.to_dict(),
              "config": packed.config, "info": packed.info, "tensors": tensors, "vocab": vocab}
    if packed.source_vocab_proto:  # absent for a shared vocabulary: those files are unchanged
        source = packed.source_vocab_proto
        header["source_vocab"] = {"offset": offset, "nbytes": len(source), "sha256": _sha(source)}
        chunks.append(source)
        offset += len(source)
    header["payload_bytes"] = offset
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    return MAGIC + _LEN.pack(len(head)) + head + b"".join(chunks)


def write_packed(path: Path, packed: PackedModel, overwrite: bool = False) -> int:
    """Write ``packed`` to ``path`` atomically; returns the file size in bytes."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
    data = encode_packed(packed)
    write_bytes_atomic(path, data)
    return len(data)


def _fail(path: Path, why: str) -> PackedFileError:
    return PackedFileError(f"{path} is not a valid packed model: {why}")


def decode_packed(data: bytes, path: Path = Path("<bytes>")) -> PackedModel:
    """Parse and verify a packed file's bytes."""
    if len(data) < len(MAGIC) + _LEN.size or not data.startswith(MAGIC):
        raise _fail(path, "wrong magic bytes (not a tf-nmt packed model, or truncated header)")
    (head_len,) = _LEN.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    if head_len > _MAX_HEADER or start + head_len > len(data):
        raise _fail(path, f"truncated header ({len(data)} bytes in the file)")
    try:
        header = json.loads(data[start:start + head_len].decode("utf-8"))
        if header.get("format") != "tf-nmt-packed":
            raise ValueError("not a tf-nmt-packed header")
        if header.get("version") != VERSION:
            raise _fail(path, f"format version {header.get('version')} (this reader knows {VERSION})")
        policy = QuantPolicy.from_dict(header["policy"])
        payload = data[start + head_len:]
        if len(payload) != header["payload_bytes"]:
            raise _fail(path, f"payload is {len(payload)} bytes but the header says "
                              f"{header['payload_bytes']} (truncated or padded file)")
        entries = [_read_tensor(t, payload, policy, path) for t in header["tensors"]]
        vocab = _slice(header["vocab"], payload, path, "vocabulary")
        source_vocab = (_slice(header["source_vocab"], payload, path, "source vocabulary")
                        if "source_vocab" in header else b"")
    except PackedFileError:
        raise
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as err:
        raise _fail(path, f"malformed header ({err})") from err
    return PackedModel(policy, entries, header.get("config") or {}, vocab, header.get("info") or {},
                       source_vocab)


def _slice(spec: Dict[str, Any], payload: bytes, path: Path, what: str) -> bytes:
    offset, nbytes = int(spec["offset"]), int(spec["nbytes"])
    if offset < 0 or nbytes < 0 or offset + nbytes > len(payload):
        raise _fail(path, f"{what} lies outside the payload")
    chunk = payload[offset:offset + nbytes]
    if _sha(chunk) != spec["sha256"]:
        raise _fail(path, f"checksum mismatch in {what} (corrupted file)")
    return chunk


def _read_tensor(spec: Dict[str, Any], payload: bytes, policy: QuantPolicy, path: Path) -> TensorEntry:
    name, shape = spec["name"], tuple(int(d) for d in spec["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    chunk = _slice(spec, payload, path, f"tensor {name}")
    if spec["encoding"] == "packed":
        if len(chunk) != packed_size(count, policy.bits):
            raise _fail(path, f"tensor {name}: {len(chunk)} bytes for {count} {policy.bits}-bit codes")
        codes = unpack_codes(np.frombuffer(chunk, np.uint8), count, policy.bits).reshape(shape)
        return TensorEntry(name, shape, codes=codes, scale=float(spec["scale"]))
    if spec["encoding"] == "float32":
        if len(chunk) != 4 * count:
            raise _fail(path, f"tensor {name}: {len(chunk)} bytes for {count} float32 values")
        return TensorEntry(name, shape, values=np.frombuffer(chunk, "<f4").astype(np.float32).reshape(shape))
    raise _fail(path, f"tensor {name}: unknown encoding {spec['encoding']!r}")


def read_packed(path: Path) -> PackedModel:
    """Load and verify a packed model file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"packed model {path} not found")
    return decode_packed(path.read_bytes(), path)
