"""The ``tf-nmt prepare-data`` flags of an own corpus, and which combinations are refused.

Kept next to the code they drive so the CLI only wires them: :func:`add_arguments` declares
them, :func:`options_from_args` turns them into :class:`.prepare.OwnCorpusOptions` (or one
:class:`~tf_nmt.errors.UsageError` line), :func:`refuse_for_builtin` refuses them without
``--train-*`` (they would be ignored by the built-in corpus).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import List

from tf_nmt.errors import UsageError

DEFAULTS = {"dev_size": 2000, "max_chars": 1000, "max_ratio": 3.0, "vocab_size": 8000,
            "vocab_type": "unigram", "vocab_sample": 1_000_000, "seed": 1234}
# flag -> argparse dest, for the flags only an own corpus uses
OWN_FLAGS = {f: f[2:].replace("-", "_") for f in (
    "--train-src", "--train-tgt", "--train-tsv", "--src-lang", "--tgt-lang", "--dev-src",
    "--dev-tgt", "--dev-tsv", "--test-src", "--test-tgt", "--test-tsv", "--max-chars",
    "--max-ratio", "--vocab-type", "--vocab-sample", "--spm-model", "--separate-vocab",
    "--src-vocab-size", "--tgt-vocab-size", "--src-spm-model", "--tgt-spm-model", "--num-shards",
    "--workers", "--allow-smaller-vocab")}
_LANG = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,15}$")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _ratio(text: str) -> float:
    value = float(text)
    if not value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be >= 1.0, got {text}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("your own corpus (any language pair, any size; streamed, resumable)")
    g.add_argument("--src-lang", help="source language code, e.g. en (names the text files)")
    g.add_argument("--tgt-lang", help="target language code, e.g. fr")
    for split, what in (("train", "the training pairs"),
                        ("dev", "default: --dev-size pairs carved from train"),
                        ("test", "default: none, unless --test-size carves some")):
        g.add_argument(f"--{split}-src", nargs="+", type=Path, metavar="FILE",
                       help=f"{split} source files, plain or .gz ({what})")
        g.add_argument(f"--{split}-tgt", nargs="+", type=Path, metavar="FILE",
                       help=f"{split} target files, line-aligned with --{split}-src")
        g.add_argument(f"--{split}-tsv", nargs="+", type=Path, metavar="FILE",
                       help=f"{split} files of source<TAB>target lines (instead of -src/-tgt)")
    g.add_argument("--max-chars", type=_positive, help=f"drop pairs with a longer side "
                   f"(characters; default {DEFAULTS['max_chars']})")
    g.add_argument("--max-ratio", type=_ratio, help="drop pairs whose lengths in characters differ "
                   f"more than this factor (default {DEFAULTS['max_ratio']})")
    g.add_argument("--vocab-type", choices=["unigram", "bpe"],
                   help=f"SentencePiece model type (default {DEFAULTS['vocab_type']})")
    g.add_argument("--vocab-sample", type=_positive, help="sentences sampled to learn the "
                   f"vocabulary (default {DEFAULTS['vocab_sample']})")
    g.add_argument("--spm-model", type=Path, help="use this SentencePiece model (ids pad 0, "
                   "unk 1, bos 2, eos 3) instead of learning one")
    g.add_argument("--separate-vocab", action="store_true", help="learn a source and a target "
                   "SentencePiece model (languages in different scripts, e.g. en-zh) instead of "
                   "one shared by both sides")
    for side, what in (("src", "source"), ("tgt", "target")):
        g.add_argument(f"--{side}-vocab-size", type=_positive, help=f"the {what} vocabulary's "
                       "size with --separate-vocab (default: --vocab-size)")
    g.add_argument("--allow-smaller-vocab", action="store_true", help="keep a learned "
                   "vocabulary that has fewer pieces than asked, when the training sample gives "
                   "no more (default: refused, naming the most it gives)")
    for side, what in (("src", "source"), ("tgt", "target")):
        g.add_argument(f"--{side}-spm-model", type=Path, help=f"use this {what} SentencePiece "
                       "model (ids as --spm-model); with --" + ("tgt" if side == "src" else "src")
                       + "-spm-model, for separate vocabularies")
    g.add_argument("--num-shards", type=_positive,
                   help="train shards (default: one per 20000 pairs, 8..1024)")
    g.add_argument("--workers", type=_positive, help="encoding processes (default: all cores)")


def own_corpus_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, d) for d in ("train_src", "train_tgt", "train_tsv"))


def _given(args: argparse.Namespace, flags) -> List[str]:
    return [f for f in flags if getattr(args, OWN_FLAGS.get(f, f[2:].replace("-", "_")))
            not in (None, False)]


def refuse_for_builtin(args: argparse.Namespace) -> None:
    """Without --train-*, prepare-data builds the built-in corpus: own-corpus flags are refused."""
    given = _given(args, OWN_FLAGS)
    if given:
        raise UsageError(f"{', '.join(given)} would be ignored: own-corpus flags need "
                         "--train-src/--train-tgt or --train-tsv (without them prepare-data "
                         "builds the built-in en-de corpus)")


def _files(args: argparse.Namespace, split: str, required: bool) -> None:
    src, tgt, tsv = (getattr(args, f"{split}_{k}") for k in ("src", "tgt", "tsv"))
    if tsv and (src or tgt):
        raise UsageError(f"--{split}-tsv or --{split}-src/--{split}-tgt, not both")
    if bool(src) != bool(tgt):
        raise UsageError(f"--{split}-src and --{split}-tgt go together")
    if src and len(src) != len(tgt):
        raise UsageError(f"--{split}-src has {len(src)} files, --{split}-tgt {len(tgt)}: "
                         "give them line-aligned, one target file per source file")
    if required and not (src or tsv):
        raise UsageError("an own corpus needs --train-src/--train-tgt or --train-tsv")


def _vocab_mode(args: argparse.Namespace) -> None:
    """One UsageError line for vocabulary flags that do not make one shared or one separate
    vocabulary: per-side sizes without --separate-vocab, one per-side model without the other,
    the shared --spm-model mixed with separate flags."""
    if bool(args.src_spm_model) != bool(args.tgt_spm_model):
        raise UsageError("--src-spm-model and --tgt-spm-model go together (the source and the "
                         "target model of separate vocabularies)")
    separate = _given(args, ("--separate-vocab", "--src-spm-model"))
    if args.spm_model and separate:
        raise UsageError(f"--spm-model is one vocabulary shared by both sides: it cannot be "
                         f"combined with {', '.join(separate)} (for separate ones give "
                         "--src-spm-model and --tgt-spm-model)")
    sizes = _given(args, ("--src-vocab-size", "--tgt-vocab-size"))
    if sizes and not args.separate_vocab and not args.src_spm_model:
        raise UsageError(f"{', '.join(sizes)} would be ignored without --separate-vocab (one "
                         "shared vocabulary takes --vocab-size)")
    if len(sizes) == 2 and args.vocab_size is not None:
        raise UsageError("--vocab-size would be ignored: --src-vocab-size and --tgt-vocab-size "
                         "set both sides")


def options_from_args(args: argparse.Namespace):
    """The :class:`OwnCorpusOptions` of the CLI flags; one UsageError line for what does not fit."""
    from .inputs import sources_from
    from .prepare import OwnCorpusOptions

    _vocab_mode(args)
    own_models = args.spm_model or args.src_spm_model
    ignored = [f"{', '.join(flags)} would be ignored {why}" for flags, why in (
        (_given(args, ("--debs-dir", "--vocab-only")), "for your own corpus"),
        (_given(args, ("--vocab-size", "--vocab-type", "--vocab-sample", "--src-vocab-size",
                       "--tgt-vocab-size", "--allow-smaller-vocab")) if own_models else [],
         "with --spm-model (its vocabulary is the model's)" if args.spm_model else
         "with --src-spm-model/--tgt-spm-model (the vocabularies are the models')"),
        (["--dev-size"] if args.dev_size is not None and (args.dev_src or args.dev_tsv)
         else [], "with dev files (dev is carved only without them)"),
        (["--test-size"] if args.test_size is not None and (args.test_src or args.test_tsv)
         else [], "with test files (test is carved only without them)")) if flags]
    if ignored:
        raise UsageError("; ".join(ignored))
    for split in ("train", "dev", "test"):
        _files(args, split, required=split == "train")
    for flag, lang in (("--src-lang", args.src_lang), ("--tgt-lang", args.tgt_lang)):
        if not lang:
            raise UsageError(f"an own corpus needs {flag} (a language code such as en)")
        if not _LANG.match(lang):
            raise UsageError(f"{flag} {lang!r}: a language code is letters, digits, - or _ "
                             "(it names the corpus files)")
    if args.src_lang == args.tgt_lang:
        raise UsageError(f"--src-lang and --tgt-lang are both {args.src_lang!r}")
    for flag in ("--vocab-size", "--src-vocab-size", "--tgt-vocab-size"):
        size = getattr(args, flag[2:].replace("-", "_"))
        if size is not None and size < 300:
            raise UsageError(f"{flag} {size}: at least 300 (256 byte pieces + specials)")
    for flag in ("--dev-size", "--test-size"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value < (1 if flag == "--dev-size" else 0):
            raise UsageError(f"{flag} {value}: must be >= {1 if flag == '--dev-size' else 0}")

    def value(name: str):
        given = getattr(args, name)
        return DEFAULTS[name] if given is None else given

    return OwnCorpusOptions(
        data_dir=Path(args.data_dir), src_lang=args.src_lang, tgt_lang=args.tgt_lang,
        train=sources_from(args.train_src, args.train_tgt, args.train_tsv),
        dev=sources_from(args.dev_src, args.dev_tgt, args.dev_tsv),
        test=sources_from(args.test_src, args.test_tgt, args.test_tsv),
        dev_size=value("dev_size"), test_size=args.test_size or 0,
        max_chars=value("max_chars"), max_ratio=value("max_ratio"),
        vocab_size=value("vocab_size"), vocab_type=value("vocab_type"),
        vocab_sample=value("vocab_sample"), spm_model=args.spm_model,
        separate_vocab=bool(args.separate_vocab or args.src_spm_model),
        src_vocab_size=args.src_vocab_size, tgt_vocab_size=args.tgt_vocab_size,
        src_spm_model=args.src_spm_model, tgt_spm_model=args.tgt_spm_model,
        num_shards=args.num_shards, workers=args.workers, seed=value("seed"), force=args.force,
        allow_smaller_vocab=bool(args.allow_smaller_vocab))
