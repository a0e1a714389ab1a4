"""``tf-nmt prepare-data`` for the user's own files: validate, hold out, clean, learn the
vocabulary, encode into shards; resumable, and with memory bounded whatever the corpus size.

Passes (each recorded in ``state.json`` when finished, skipped when resumed, timed in the
manifest):

1. ``validate``: every input read once, every error (``file:line``) raised before anything is
   written; counts lines and fills the reservoir dev/test are carved from;
2. ``heldout``: dev/test written (carved, or the given files);
3. ``distribute``: the train pairs cleaned and spread over one bucket file per shard, while a
   reservoir keeps the vocabulary sample;
4. ``vocab``: SentencePiece learned from the sample (or the user's model checked); with
   separate vocabularies, one model from the sample's sources, one from its targets;
5. ``shards``: worker processes encode the buckets; finished shards survive a kill.
"""
from __future__ import annotations

import functools
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from tf_nmt.data.prepared import MANIFEST_FORMAT, vocab_fingerprint
from tf_nmt.utils.io import replace_directory_atomically, write_bytes_atomic, write_json_atomic
from tf_nmt.utils.machine import usable_cores

from . import shards as shard_pass
from .buckets import BucketWriter
from .clean import REASONS, Filters, add_counts, new_counts, normalize_pair
from .errors import OwnCorpusError
from .heldout import Reservoir, carve, read_given, read_sources, write_split
from .inputs import PairReader, Source, check_exist, fingerprint
from .progress import Progress
from .staging import Staging, build_key, cached_or_refused, clear_leftover
from .vocab import (SAMPLE_FILES, VocabSample, check_same_ids, learn, learned_size,
                    load_user_model, model_facts, separate_models, write_sample)

Log = Callable[[str], None]
log_flush: Log = functools.partial(print, flush=True)
PAIRS_PER_SHARD = 20_000
MIN_SHARDS, MAX_SHARDS = 8, 1024
TICK = 4096  # pairs between progress checks
HELDOUT = ("dev", "test")


@dataclass
class OwnCorpusOptions:
    """What ``tf-nmt prepare-data --train-...`` was asked (see the CLI for each flag)."""

    data_dir: Path
    src_lang: str
    tgt_lang: str
    train: List[Source]
    dev: List[Source] = field(default_factory=list)    # empty: carve dev_size from train
    test: List[Source] = field(default_factory=list)   # empty: carve test_size (0: no test)
    dev_size: int = 2000
    test_size: int = 0
    max_chars: int = 1000
    max_ratio: float = 3.0
    vocab_size: int = 8000
    vocab_type: str = "unigram"
    vocab_sample: int = 1_000_000
    spm_model: Optional[Path] = None
    separate_vocab: bool = False       # a source and a target model (implied by src/tgt_spm_model)
    src_vocab_size: Optional[int] = None   # separate only; None: vocab_size
    tgt_vocab_size: Optional[int] = None
    src_spm_model: Optional[Path] = None   # separate, the user's own models (both or neither)
    tgt_spm_model: Optional[Path] = None
    num_shards: Optional[int] = None   # None: auto
    workers: Optional[int] = None      # None: all cores
    seed: int = 1234
    force: bool = False
    allow_smaller_vocab: bool = False  # keep fewer pieces than asked (not a param: a re-run
    #                                    with it resumes the passes before the vocabulary)

    @property
    def separate(self) -> bool:
        """True for separate source/target vocabularies."""
        return self.separate_vocab or self.src_spm_model is not None

    @property
    def user_models(self) -> bool:
        """True when the user gave the model(s): nothing is learned, no sample is kept."""
        return self.spm_model is not None or self.src_spm_model is not None

    def side_sizes(self) -> Dict[str, int]:
        """The vocabulary size to learn per side (separate vocabularies)."""
        return {"source": self.src_vocab_size or self.vocab_size,
                "target": self.tgt_vocab_size or self.vocab_size}

    def params(self) -> Dict[str, Any]:
        """What decides the result (workers and force do not)."""
        vocab = ({"model": str(self.spm_model.resolve())} if self.spm_model else
                 {"size": self.vocab_size, "type": self.vocab_type, "sample": self.vocab_sample})
        if self.separate:  # the shared form above stays as it was: old corpora keep their key
            vocab = {"shared": False, **(
                {"models": {"source": str(self.src_spm_model.resolve()),
                            "target": str(self.tgt_spm_model.resolve())}}
                if self.src_spm_model and self.tgt_spm_model else
                {"sizes": self.side_sizes(), "type": self.vocab_type,
                 "sample": self.vocab_sample})}
        return {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                "dev_size": None if self.dev else self.dev_size,
                "test_size": None if self.test else self.test_size,
                "max_chars": self.max_chars, "max_ratio": self.max_ratio, "vocab": vocab,
                "num_shards": self.num_shards or "auto", "seed": self.seed}

    def inputs(self) -> Dict[str, Any]:
        found = {split: fingerprint(getattr(self, split)) for split in ("train",) + HELDOUT}
        if self.spm_model:
            found["spm_model"] = fingerprint([Source(self.spm_model)])
        if self.src_spm_model and self.tgt_spm_model:
            found["src_spm_model"] = fingerprint([Source(self.src_spm_model)])
            found["tgt_spm_model"] = fingerprint([Source(self.tgt_spm_model)])
        return found

    def carve_sizes(self) -> Dict[str, int]:
        return {"dev": 0 if self.dev else self.dev_size, "test": 0 if self.test else self.test_size}


def auto_shards(train_pairs: int) -> int:
    return min(max(math.ceil(train_pairs / PAIRS_PER_SHARD), MIN_SHARDS), MAX_SHARDS)


def _train_pairs(options: OwnCorpusOptions, tick: Callable[[int, float], None]):
    """(line index, src, tgt) of every train line, all files in order."""
    total = sum(os.path.getsize(s.src) for s in options.train) or 1
    index, done_bytes = 0, 0
    for source in options.train:
        reader, size = PairReader(source), os.path.getsize(source.src)
        for src, tgt in reader:
            yield index, src, tgt
            index += 1
            if index % TICK == 0:
                tick(index, (done_bytes + reader.fraction() * size) / total)
        done_bytes += size


def _validate(options: OwnCorpusOptions, log: Log) -> Dict[str, Any]:
    """Pass 1: read everything (errors raised here, before any write), count, sample held-out."""
    filters, sizes = Filters(options.max_chars, options.max_ratio), options.carve_sizes()
    reservoir = Reservoir(sum(sizes.values()), random.Random(options.seed))
    progress = Progress("validate", log)
    candidates = lines = 0
    for lines, src, tgt in _train_pairs(options, progress.tick):
        src, tgt = normalize_pair(src, tgt)
        if filters.reject(src, tgt) is None:
            candidates += 1
            reservoir.add((lines, src, tgt))
    lines += 1
    for split in HELDOUT:
        for source in getattr(options, split):
            for _ in PairReader(source):
                pass
    carved = sum(sizes.values())
    if candidates <= carved:
        asked = " + ".join(f"--{s}-size {n}" for s, n in sizes.items() if n)
        raise OwnCorpusError(f"the train files hold {candidates} usable pairs: too few to carve "
                             f"{asked} and keep any for training")
    seconds = progress.elapsed()
    log(f"validate: {lines:,} lines read, {candidates:,} usable, in {seconds:.1f} s")
    return {"lines": lines, "candidates": candidates, "reservoir": reservoir.items,
            "seconds": seconds}


def _heldout(options: OwnCorpusOptions, staging: Staging, found: Dict[str, Any],
             layout: Callable[[str], tuple]) -> Dict[str, Any]:
    """Pass 2: write dev (and test) and note which train lines they took."""
    start = time.monotonic()
    carved = carve(found["reservoir"], options.carve_sizes(), options.seed)
    splits, counts = {}, {}
    taken = [item[0] for item in found["reservoir"]]  # every sampled line leaves train
    for split in HELDOUT:
        given = getattr(options, split)
        if given:
            pairs, counts[split] = read_given(given)
            origin = "files"
        elif carved[split][1]["read"]:
            items, counts[split] = carved[split]
            pairs, origin = [(s, t) for _, s, t in items], "carved from train"
        else:
            continue
        if not pairs:
            raise OwnCorpusError(f"the {split} files hold no pair with text on both sides")
        write_split(layout(split), pairs)
        splits[split] = {"pairs": len(pairs), "origin": origin}
    return {"splits": splits, "cleaning": counts, "taken": sorted(set(taken)),
            "seconds": time.monotonic() - start}


def _distribute(options: OwnCorpusOptions, staging: Staging, shard_count: int, log: Log
                ) -> Dict[str, Any]:
    """Pass 3: clean the train pairs into one bucket file per shard; sample the vocabulary."""
    state = staging.state
    taken = set(state["heldout"]["taken"])
    filters, counts = Filters(options.max_chars, options.max_ratio), new_counts()
    buckets = BucketWriter(staging.work / "buckets", shard_count, options.seed)
    sample = None if options.user_models else VocabSample(options.vocab_sample, options.seed)
    progress = Progress("distribute", log, total=state["validate"]["lines"])
    for index, src, tgt in _train_pairs(options, lambda done, _: progress.tick(done)):
        if index in taken:
            continue
        counts["read"] += 1
        src, tgt = normalize_pair(src, tgt)
        reason = filters.reject(src, tgt)
        if reason:
            counts[reason] += 1
            continue
        buckets.add(src, tgt)
        if sample is not None:
            sample.add(src, tgt)
    buckets.finish()
    sentences = sample.sentences() if sample is not None else []
    if options.separate:  # one file per side (sentences alternate source, target)
        for side, name in enumerate(SAMPLE_FILES):
            write_sample(staging.work / name, sentences[side::2])
    else:
        write_sample(staging.work / "vocab_sample.txt", sentences)
    seconds = progress.elapsed()
    log(f"distribute: {sum(buckets.pairs):,} train pairs into {shard_count} buckets in "
        f"{seconds:.1f} s")
    return {"counts": counts, "bucket_pairs": buckets.pairs, "shard_count": shard_count,
            "seconds": seconds}


def _vocab(options: OwnCorpusOptions, staging: Staging, log: Log,
           layout: Callable[[str], tuple]) -> Dict[str, Any]:
    """Pass 4: the vocabulary, written as ``vocab/spm-<pieces>.model`` (separate:
    ``vocab/spm-src-<pieces>.model`` and ``vocab/spm-tgt-<pieces>.model``), named and recorded
    (``size``) by the pieces it has; a learned one also records the ``requested`` size, and
    fewer pieces than asked are refused unless ``--allow-smaller-vocab``
    (:func:`.vocab.learned_size`)."""
    if options.separate:
        return _separate_vocab(options, staging, log, layout)
    start = time.monotonic()
    sentences = (staging.work / "vocab_sample.txt").read_text(encoding="utf-8").splitlines()
    if options.spm_model:
        proto = load_user_model(options.spm_model)
        source = f"user model {options.spm_model.resolve()}"
    else:
        log(f"vocab: learning a {options.vocab_type} SentencePiece model of up to "
            f"{options.vocab_size:,} pieces from {len(sentences):,} sampled sentences")
        proto = learn(sentences, options.vocab_size, options.vocab_type, options.seed)
        source = "learned from the train sample"
    pieces, model_type = model_facts(proto)
    size = pieces if options.spm_model else learned_size(
        pieces, options.vocab_size, options.allow_smaller_vocab, "", "--vocab-size", log)
    check_same_ids(proto, sentences or _dev_sentences(staging))
    path = f"vocab/spm-{size}.model"
    write_bytes_atomic(staging.out / path, proto)
    return {"shared": True, "path": path, "size": size, "pieces": pieces, "type": model_type,
            **({} if options.spm_model else {"requested": options.vocab_size}),
            "sample_sentences": len(sentences), "source": source,
            "fingerprint": vocab_fingerprint(proto), "seconds": time.monotonic() - start}


def _separate_vocab(options: OwnCorpusOptions, staging: Staging, log: Log,
                    layout: Callable[[str], tuple]) -> Dict[str, Any]:
    """Pass 4 with separate vocabularies (:func:`.vocab.separate_models`)."""
    start = time.monotonic()
    found = separate_models(
        staging.work, staging.out, options.side_sizes(),
        {"source": options.src_spm_model, "target": options.tgt_spm_model},
        options.vocab_type, options.seed, layout("dev"), log, options.allow_smaller_vocab,
        {side: f"--{short}-vocab-size" if getattr(options, f"{short}_vocab_size")
         else "--vocab-size" for side, short in (("source", "src"), ("target", "tgt"))})
    return {**found, "seconds": time.monotonic() - start}


def _dev_sentences(staging: Staging) -> List[str]:
    corpus = staging.out / "corpus"
    return [line for path in sorted(corpus.glob("dev.*"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def _shards(options: OwnCorpusOptions, staging: Staging, layout: Callable[[str], tuple],
            log: Log) -> float:
    """Pass 5: encode the buckets not yet done into shards (the state records each one)."""
    state, start = staging.state, time.monotonic()
    count = state["distribute"]["shard_count"]
    shards_dir = staging.out / "shards"
    done = {int(i): info for i, info in state["shards"].items()
            if (shards_dir / info["name"]).is_file()
            and (shards_dir / info["name"]).stat().st_size == info["bytes"]}
    state["shards"] = {str(i): info for i, info in done.items()}
    pending = [i for i in range(count) if i not in done]
    if done:
        log(f"shards: reusing {len(done)} of {count} shards finished by an earlier run")
    heldout = set()
    for split in state["heldout"]["splits"]:
        heldout |= read_sources(layout(split)[0])
    proto = (staging.out / state["vocab"]["path"]).read_bytes()
    source_proto = (None if state["vocab"].get("shared", True) else
                    (staging.out / state["vocab"]["src"]["path"]).read_bytes())
    bucket_pairs = state["distribute"]["bucket_pairs"]
    progress = Progress("shards", log, total=sum(bucket_pairs[i] for i in pending))
    finished = [0]

    def on_done(info: Dict[str, Any]) -> None:
        state["shards"][str(info["index"])] = info
        staging.save()
        finished[0] += bucket_pairs[info["index"]]
        progress.tick(finished[0])

    workers = options.workers or usable_cores()
    shard_pass.encode_shards(staging.work / "buckets", shards_dir, count, pending, proto,
                             sorted(heldout), options.seed, workers, on_done,
                             source_proto=source_proto)
    seconds = time.monotonic() - start
    log(f"shards: {len(pending)} encoded{f' ({len(done)} reused)' if done else ''} in {seconds:.1f} s")
    return seconds


def _manifest(options: OwnCorpusOptions, state: Dict[str, Any], key: str) -> Dict[str, Any]:
    count = state["distribute"]["shard_count"]
    infos = [state["shards"][str(i)] for i in range(count)]
    train = add_counts(dict(state["distribute"]["counts"]), {
        "duplicates": sum(i["duplicates"] for i in infos),
        "overlap": sum(i["overlap"] for i in infos)})
    train["kept"] = sum(i["pairs"] for i in infos)
    cleaning = {"train": train, **state["heldout"]["cleaning"]}
    splits = {"train": {"pairs": train["kept"], "origin": "files"}, **state["heldout"]["splits"]}
    pairs = {"validate": state["validate"]["lines"], "heldout": sum(
        c["read"] for c in state["heldout"]["cleaning"].values()),
        "distribute": train["read"], "vocab": state["vocab"]["sample_sentences"],
        "shards": train["kept"]}
    seconds = {"validate": state["validate"]["seconds"], "heldout": state["heldout"]["seconds"],
               "distribute": state["distribute"]["seconds"], "vocab": state["vocab"]["seconds"],
               "shards": state["timings"].get("shards", 0.0)}
    vocab = {k: v for k, v in state["vocab"].items() if k != "seconds"}
    return {
        "format": MANIFEST_FORMAT, "name": "own", "key": key,
        "src_lang": options.src_lang, "tgt_lang": options.tgt_lang,
        "splits": splits, "cleaning": cleaning, "vocab": vocab,
        "shards": {"count": count, "files": [
            {k: i[k] for k in ("name", "pairs", "bytes", "src_tokens", "tgt_tokens")}
            for i in infos]},
        "inputs": {split: [s.describe() for s in getattr(options, split)] or
                   ("carved from train" if split in splits else "none")
                   for split in ("train",) + HELDOUT},
        "params": options.params(),
        "timings": {"seconds": {k: round(v, 3) for k, v in seconds.items()},
                    "pairs_per_s": {k: round(pairs[k] / v, 1) if v > 0 else None
                                    for k, v in seconds.items()}},
    }


def pieces_said(vocab: Dict[str, Any]) -> str:
    """A vocabulary's size in words: its pieces, and the size asked when it has fewer."""
    pieces, asked = vocab.get("pieces", vocab["size"]), vocab.get("requested")
    return f"{pieces:,} pieces" + (f" ({asked:,} asked)" if asked and asked != pieces else "")


def summary_table(manifest: Dict[str, Any]) -> str:
    """Kept and dropped pairs per split and reason, as plain text."""
    columns = ("read",) + REASONS + ("kept",)
    header = f"{'split':<6}" + "".join(f"{c:>11}" for c in columns)
    rows = [header, "-" * len(header)]
    for split, counts in manifest["cleaning"].items():
        rows.append(f"{split:<6}" + "".join(f"{counts.get(c, 0):>11,}" for c in columns))
    return "\n".join(rows)


def prepare_own_corpus(options: OwnCorpusOptions, log: Log = log_flush) -> Dict[str, Any]:
    """Prepare (or find already prepared) the own corpus ``options`` describe; its manifest."""
    start = time.monotonic()
    data_dir = Path(options.data_dir)
    check_exist(options.train + options.dev + options.test)
    for model in (options.spm_model, options.src_spm_model, options.tgt_spm_model):
        if model:
            load_user_model(model)  # refused before any pass
    key = build_key(options.inputs(), options.params())
    cached = cached_or_refused(data_dir, key, options.params(), options.force, log)
    staging = Staging(data_dir, key, log) if cached is None else None
    if cached is not None:
        log(f"own corpus cache hit: {data_dir} already holds this corpus (same inputs and "
            "parameters); nothing rewritten")
        clear_leftover(data_dir, key, log)
        log(summary_table(cached))
        return cached
    assert staging is not None
    state = staging.state

    def layout(split: str) -> tuple:
        base = staging.out / "corpus"
        return base / f"{split}.{options.src_lang}", base / f"{split}.{options.tgt_lang}"

    if "validate" not in state:
        found = _validate(options, log)
        staging.save()  # the first write: every input is valid
        try:
            state["heldout"] = _heldout(options, staging, found, layout)
        except OwnCorpusError:
            staging.discard()
            raise
        state["validate"] = {k: found[k] for k in ("lines", "candidates", "seconds")}
        staging.save()
    else:
        log("validate, heldout: done by an earlier run, skipped")
    if "distribute" not in state:
        train_pairs = state["validate"]["candidates"] - len(state["heldout"]["taken"])
        count = options.num_shards or auto_shards(train_pairs)
        state["distribute"] = _distribute(options, staging, count, log)
        staging.save()
    else:
        log("distribute: done by an earlier run, skipped")
    if "vocab" not in state:
        state["vocab"] = _vocab(options, staging, log, layout)
        staging.save()
    else:
        log("vocab: done by an earlier run, skipped")
    state["timings"]["shards"] = _shards(options, staging, layout, log)
    manifest = _manifest(options, state, key)
    write_json_atomic(staging.out / "corpus" / "manifest.json", manifest)
    replace_directory_atomically(staging.out, data_dir, overwrite=True)
    staging.discard()
    log(summary_table(manifest))
    vocab = manifest["vocab"]
    words = (f"vocabulary of {pieces_said(vocab)} ({vocab['fingerprint']})"
             if vocab.get("shared", True) else
             f"vocabularies: source {pieces_said(vocab['src'])} ({vocab['src']['fingerprint']}), "
             f"target {pieces_said(vocab['tgt'])} ({vocab['tgt']['fingerprint']})")
    log(f"own corpus ({options.src_lang}-{options.tgt_lang}) written to {data_dir}: "
        f"{manifest['splits']['train']['pairs']:,} train pairs in {len(manifest['shards']['files'])} "
        f"shards, {words}, in {time.monotonic() - start:.1f} s")
    return manifest
