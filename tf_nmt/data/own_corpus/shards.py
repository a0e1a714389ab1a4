"""Encode the train buckets into TFRecord shards in worker processes; the main process writes.

Workers (a ``spawn`` pool; they import :mod:`.encode_worker`, never TensorFlow) encode one bucket
each and return its permuted records; the main process writes each shard with
``tf.io.TFRecordWriter`` under a temporary name and renames it, so a shard under its final name
is always complete, and a killed run resumes with the shards it finished.
"""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from tf_nmt.utils.io import fsync_directory, fsync_file

from . import encode_worker
from .buckets import bucket_path

ShardDone = Callable[[Dict[str, Any]], None]


def shard_name(index: int, count: int) -> str:
    return f"train-{index:05d}-of-{count:05d}.tfrecord"


def write_shard(path: Path, records: Sequence[bytes]) -> int:
    """Write ``records`` as the TFRecord file ``path`` (temp name, fsync, rename, fsync of the
    directory: durable before the state claims it); its size."""
    from tf_nmt.compat import tf

    tmp = path.with_name(f".{path.name}.tmp")
    with tf.io.TFRecordWriter(str(tmp)) as writer:
        for record in records:
            writer.write(record)
    fsync_file(tmp)  # the state records the shard as finished right after
    os.replace(tmp, path)
    fsync_directory(path.parent)
    return path.stat().st_size


def _results(tasks: List[tuple], proto: bytes, heldout: List[str], workers: int,
             source_proto: Optional[bytes] = None) -> Iterator[Dict[str, Any]]:
    if workers <= 1 or len(tasks) <= 1:
        encode_worker.init(proto, heldout, source_proto)
        yield from map(encode_worker.encode_bucket, tasks)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(workers, len(tasks)), initializer=encode_worker.init,
                      initargs=(proto, heldout, source_proto)) as pool:
        yield from pool.imap_unordered(encode_worker.encode_bucket, tasks)


def encode_shards(buckets: Path, shards: Path, count: int, pending: Sequence[int],
                  proto: bytes, heldout: List[str], seed: int, workers: int,
                  on_done: ShardDone, source_proto: Optional[bytes] = None) -> None:
    """Encode and write the shards ``pending`` (of ``count``); ``on_done`` gets each finished
    shard's description (ShardInfo fields, its index and its duplicates/overlap counts).
    ``proto`` encodes both sides, or only the targets when ``source_proto`` (separate
    vocabularies) encodes the sources."""
    shards.mkdir(parents=True, exist_ok=True)
    fsync_directory(shards.parent)
    tasks = [(index, str(bucket_path(buckets, index)), seed) for index in pending]
    for result in _results(tasks, proto, heldout, workers, source_proto):
        name = shard_name(result["index"], count)
        size = write_shard(shards / name, result["records"])
        on_done({"index": result["index"], "name": name, "pairs": result["kept"], "bytes": size,
                 "src_tokens": result["src_tokens"], "tgt_tokens": result["tgt_tokens"],
                 "duplicates": result["duplicates"], "overlap": result["overlap"]})
