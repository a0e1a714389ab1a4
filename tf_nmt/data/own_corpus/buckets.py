"""Spread the kept train pairs over ``n`` bucket files, one per shard, without holding them.

A pair's bucket is a keyed hash (the seed is the key) of its text: as good as a seeded random
choice for balance and order, and it sends every copy of a pair to the same bucket, so exact
duplicates are found per bucket (:mod:`.encode_worker`) with memory bounded by a bucket, not the
corpus. Lines are ``source<TAB>target`` (cleaned sides hold no TAB or newline); writes are
buffered and appended, so any number of buckets needs only one open file at a time.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import List

from tf_nmt.utils.io import fsync_directory, fsync_tree

FLUSH_BYTES = 64 << 20  # buffered across all buckets


def bucket_path(directory: Path, index: int) -> Path:
    return directory / f"bucket-{index:05d}.tsv"


class BucketWriter:
    def __init__(self, directory: Path, n: int, seed: int) -> None:
        self.directory, self.n = directory, n
        self._key = hashlib.sha256(f"tf-nmt-buckets-{seed}".encode()).digest()[:16]
        self._buffers: List[List[bytes]] = [[] for _ in range(n)]
        self._buffered = 0
        self.pairs = [0] * n
        directory.mkdir(parents=True, exist_ok=True)
        for index in range(n):
            bucket_path(directory, index).write_bytes(b"")

    def add(self, src: str, tgt: str) -> None:
        line = f"{src}\t{tgt}\n".encode("utf-8")
        digest = hashlib.blake2b(line, digest_size=8, key=self._key).digest()
        index = int.from_bytes(digest, "little") % self.n
        self._buffers[index].append(line)
        self.pairs[index] += 1
        self._buffered += len(line)
        if self._buffered >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        for index, lines in enumerate(self._buffers):
            if lines:
                with open(bucket_path(self.directory, index), "ab") as handle:
                    handle.write(b"".join(lines))
                lines.clear()
        self._buffered = 0

    def finish(self) -> None:
        """Flush and fsync every bucket file and their directory: the state then records the
        distribute pass as done, and a resume reads the buckets instead of rewriting them."""
        self.flush()
        fsync_tree(self.directory)
        fsync_directory(self.directory.parent)
