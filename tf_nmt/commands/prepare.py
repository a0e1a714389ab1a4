"""``tf-nmt prepare-data``: the built-in en-de corpus from Debian packages, or the user's own
files (:mod:`tf_nmt.data.own_corpus`), with its SentencePiece vocabulary."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Dict, Optional

from tf_nmt.data.builtin_corpus import prepare_corpus
from tf_nmt.data.data_dir import ensure_vocab
from tf_nmt.data.own_corpus.cli_args import DEFAULTS as OWN_DEFAULTS
from tf_nmt.errors import UsageError
from tf_nmt.utils.io import write_json_atomic


def prepare_own_corpus(options: Any, stats_json: Optional[Path] = None) -> Dict[str, Any]:
    """The user's own files, cleaned, held out and encoded into shards (``options``: an
    :class:`~tf_nmt.data.own_corpus.prepare.OwnCorpusOptions`); returns its manifest."""
    from tf_nmt.data.own_corpus.prepare import prepare_own_corpus as prepare

    manifest = prepare(options)
    if stats_json:
        write_json_atomic(Path(stats_json), manifest)
    return manifest


def forget_own_corpus(data_dir: Path) -> None:
    """``--force`` over an own corpus: its manifest, vocabulary and shards go before the built-in
    corpus is built (its vocab/spm-N.model would otherwise be taken for the built-in one's)."""
    from tf_nmt.data.prepared import manifest_path

    if manifest_path(data_dir).is_file():
        print(f"--force: removing the own corpus in {data_dir}")
        for sub in ("vocab", "shards"):
            shutil.rmtree(data_dir / sub, ignore_errors=True)
        manifest_path(data_dir).unlink()


def prepare_builtin(data_dir: Path, vocab_size: Optional[int] = None,
                    debs_dir: Optional[Path] = None, dev_size: Optional[int] = None,
                    test_size: Optional[int] = None, seed: Optional[int] = None,
                    force: bool = False, vocab_only: bool = False,
                    stats_json: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """The built-in corpus and its vocabulary (``vocab_only``: only learn the vocabulary of the
    corpus already in ``data_dir/corpus``); returns the corpus statistics (None with
    ``vocab_only``). Split sizes and seed not given take the builder's defaults."""
    data_dir = Path(data_dir)
    vocab_size = vocab_size or OWN_DEFAULTS["vocab_size"]
    start = time.perf_counter()
    if vocab_only:
        given = [flag for flag, on in (("--debs-dir", debs_dir is not None),
                                       ("--dev-size", dev_size is not None),
                                       ("--test-size", test_size is not None),
                                       ("--seed", seed is not None),
                                       ("--force", force),
                                       ("--stats-json", stats_json is not None)) if on]
        if given:
            raise UsageError(f"--vocab-only builds no corpus: {', '.join(given)} would be ignored")
        stats = None
    else:
        sizes = {k: v for k, v in (("dev_size", dev_size), ("test_size", test_size),
                                   ("seed", seed)) if v is not None}
        if force:
            forget_own_corpus(data_dir)
        stats = prepare_corpus(data_dir, debs_dir=debs_dir, force=force, **sizes)
    tokenizer = ensure_vocab(data_dir, vocab_size)
    print(f"vocabulary: {tokenizer.vocab_size} pieces (fingerprint {tokenizer.fingerprint})")
    print(f"prepare-data finished in {time.perf_counter() - start:.1f} s")
    if stats_json:
        write_json_atomic(Path(stats_json), stats)
    return stats
