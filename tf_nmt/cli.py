"""The ``tf-nmt`` command line: prepare-data, train, evaluate, translate, export,
average-checkpoints and quickstart (the whole main job).

Heavy imports (TensorFlow) happen inside the subcommands so ``tf-nmt --help`` is instant.
Expected failures (bad config, bad corpus, mismatched resume, existing outputs, divergence)
are reported as one clear ``tf-nmt: error: ...`` line with exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import List, Optional

from tf_nmt.config import (COMM_MODES, PRESETS, QUICKSTART_AVERAGE_LAST, QUICKSTART_MINUTES,
                           QUICKSTART_PRECISIONS)
from tf_nmt.data.corpus.builder import SPLIT_DEFAULTS
from tf_nmt.data.own_corpus import cli_args as own_cli
from tf_nmt.errors import UsageError, UserError
from tf_nmt.export import SERVING_CHUNK_SIZE, record_exported_weights
from tf_nmt.utils import allocator
from tf_nmt.utils.io import write_json_atomic, write_text_atomic


def _config(args: argparse.Namespace):
    from tf_nmt.config import Config, load_config, preset

    base = preset(args.preset) if getattr(args, "preset", None) else Config()
    cfg = load_config(args.config, args.set, base=base)
    if getattr(args, "data_dir", None):
        cfg.data.data_dir = str(args.data_dir)
    return cfg


def _prepare_own_corpus(args: argparse.Namespace) -> int:
    """prepare-data --train-*: the user's own files, cleaned, held out, encoded into shards."""
    from tf_nmt.data.own_corpus.prepare import prepare_own_corpus

    manifest = prepare_own_corpus(own_cli.options_from_args(args))
    if args.stats_json:
        write_json_atomic(Path(args.stats_json), manifest)
    return 0


def _forget_own_corpus(data_dir: Path) -> None:
    """--force over an own corpus: its manifest, vocabulary and shards go before the built-in
    corpus is built (its vocab/spm-N.model would otherwise be taken for the built-in one's)."""
    import shutil

    from tf_nmt.data.prepared import manifest_path

    if manifest_path(data_dir).is_file():
        print(f"--force: removing the own corpus in {data_dir}")
        for sub in ("vocab", "shards"):
            shutil.rmtree(data_dir / sub, ignore_errors=True)
        manifest_path(data_dir).unlink()


def cmd_prepare_data(args: argparse.Namespace) -> int:
    from tf_nmt.data.corpus import prepare_corpus
    from tf_nmt.data.vocabulary import ensure_vocab

    if own_cli.own_corpus_given(args):
        return _prepare_own_corpus(args)
    own_cli.refuse_for_builtin(args)
    args.vocab_size = args.vocab_size or own_cli.DEFAULTS["vocab_size"]
    start = time.perf_counter()
    if args.vocab_only:  # the user's own corpus: learn its vocabulary, build nothing
        given = [flag for flag, on in (("--debs-dir", args.debs_dir is not None),
                                       ("--dev-size", args.dev_size is not None),
                                       ("--test-size", args.test_size is not None),
                                       ("--seed", args.seed is not None),
                                       ("--force", args.force),
                                       ("--stats-json", args.stats_json is not None)) if on]
        if given:
            raise UsageError(f"--vocab-only builds no corpus: {', '.join(given)} would be ignored")
        stats = None
    else:
        sizes = {k: getattr(args, k) for k in SPLIT_DEFAULTS if getattr(args, k) is not None}
        if args.force:
            _forget_own_corpus(Path(args.data_dir))
        stats = prepare_corpus(Path(args.data_dir), debs_dir=args.debs_dir, force=args.force,
                               **sizes)  # prepare_corpus's defaults for what was not given
    tokenizer = ensure_vocab(Path(args.data_dir), args.vocab_size)
    print(f"vocabulary: {tokenizer.vocab_size} pieces (fingerprint {tokenizer.fingerprint})")
    print(f"prepare-data finished in {time.perf_counter() - start:.1f} s")
    if args.stats_json:
        write_json_atomic(Path(args.stats_json), stats)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from tf_nmt.training.trainer import train

    cfg = _config(args)
    if args.quantize_bits is not None:  # re-training under quantisation (train.quantize_*)
        cfg.train.quantize_bits = args.quantize_bits
        cfg.mark_given("train.quantize_bits")
    if args.comm:
        cfg.train.comm = args.comm
        cfg.mark_given("train.comm")
    if args.init_from:
        cfg.train.init_from = str(args.init_from)
        cfg.mark_given("train.init_from")
    if args.embeddings:  # refused without --init-from (tf_nmt.config_usage)
        cfg.train.init_embeddings = args.embeddings
        cfg.mark_given("train.init_embeddings")
    if args.no_warmup:
        cfg.train.init_warmup = False
        cfg.mark_given("train.init_warmup")
    if args.elastic:  # Horovod elastic: survive lost workers, take returning ones back
        from tf_nmt.training.elastic import train_elastic

        result = train_elastic(cfg, Path(args.run_dir))
    else:
        result = train(cfg, Path(args.run_dir),
                       allow_world_size_change=args.allow_world_size_change)
    print(f"trained to step {result.final_step} in {result.wall_seconds / 60:.1f} min")
    return 0


def cmd_train_async(args: argparse.Namespace) -> int:
    from tf_nmt.training.async_trainer import train_nmt_async

    train_nmt_async(_config(args), Path(args.run_dir), workers=args.workers, k=args.k,
                    synchronous=args.synchronous, refresh_every=args.refresh_every,
                    n_push=args.n_push, n_fetch=args.n_fetch, progress_every=args.progress_every)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from tf_nmt.evaluation.evaluate import evaluate_run
    from tf_nmt.run_dir import choose_weights
    from tf_nmt.utils.io import write_json_atomic

    checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
    report = evaluate_run(Path(args.run_dir), split=args.split, checkpoint=checkpoint,
                          data_dir=args.data_dir, beam_size=args.beam_size,
                          length_penalty=args.length_penalty, limit=args.limit,
                          engine="lowprec" if args.lowprec else "emulated", weights=weights)
    if args.output_json:
        write_json_atomic(Path(args.output_json), report)
    return 0


def _read_lines(path: Optional[str]) -> List[str]:
    """The input's lines; invalid UTF-8 is one error line naming the first bad line."""
    if path is None or path == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:  # a text stream (e.g. replaced in tests): already decoded
            return [line.rstrip("\n") for line in sys.stdin]
        text = _decode(stdin.read(), "stdin").replace("\r\n", "\n").replace("\r", "\n")
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    return _decode(Path(path).read_bytes(), path).splitlines()


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        raise UsageError(f"{name}: line {line} is not valid UTF-8 ({err.reason} at byte "
                         f"{column} of the line)") from None


def _translate_ctranslate2(args: argparse.Namespace, lines: List[str]) -> List[str]:
    """Translate with a CTranslate2 export (length-sorted batches, progress on stderr)."""
    from tf_nmt.export.ctranslate2 import CTranslate2Translator, Progress, translate_sorted

    engine = CTranslate2Translator(Path(args.export_dir), use_vmap=args.vmap)
    print(engine.describe(), file=sys.stderr)
    progress = Progress(total=len(lines))
    try:
        return list(translate_sorted(engine, lines, args.beam_size, args.batch_size, progress))
    finally:
        progress.close()


def cmd_translate(args: argparse.Namespace) -> int:
    from tf_nmt.export.ctranslate2 import is_ctranslate2_dir

    lines = _read_lines(args.input)
    if args.export_dir and args.lowprec:
        raise UsageError("--lowprec translates from --run-dir (the export runs stock ops)")
    if args.export_dir and args.checkpoint:
        raise UsageError("--checkpoint would be ignored: an export holds one model (export "
                         "another checkpoint, or translate with --run-dir --checkpoint)")
    if args.export_dir and args.weights:
        raise UsageError("--weights would be ignored: an export holds the weights it was "
                         "exported with (tf-nmt export --weights; translate with --run-dir "
                         "--weights)")
    if args.vmap is not None and not (args.export_dir and is_ctranslate2_dir(args.export_dir)):
        raise UsageError("--vmap/--no-vmap would be ignored: the vocabulary map is for a "
                         "CTranslate2 export (`tf-nmt export --format ctranslate2`)")
    if args.export_dir and is_ctranslate2_dir(args.export_dir):
        outputs = _translate_ctranslate2(args, lines)
    elif args.export_dir:
        if args.beam_size:
            raise UsageError("--beam-size would be ignored: a SavedModel's beam is fixed when it "
                             "is exported (tf-nmt export --beam-size)")
        from tf_nmt.compat import tf
        import tensorflow_text  # noqa: F401  (SentencePiece ops)

        if not (Path(args.export_dir) / "saved_model.pb").is_file():
            raise UsageError(f"--export-dir {args.export_dir}: no SavedModel there "
                             "(saved_model.pb is missing) and no CTranslate2 export (model.bin "
                             "and tf_nmt_export.json); export one with `tf-nmt export`")

        serve = tf.saved_model.load(str(args.export_dir)).signatures["serving_default"]
        outputs = []
        for start in range(0, len(lines), args.batch_size):
            batch = tf.constant(lines[start:start + args.batch_size] or [""])
            outputs += [t.decode("utf-8") for t in serve(texts=batch)["translations"].numpy()]
        outputs = outputs[:len(lines)]
    else:
        from tf_nmt.evaluation.translate import make_translate_fn, translate_texts
        from tf_nmt.models.activation_quant import inference_engine, use_engine
        from tf_nmt.run_dir import choose_weights, load_trained_model

        checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
        model, tokenizer, cfg = load_trained_model(Path(args.run_dir), checkpoint, weights)
        print(f"translating with the {weights} weights of {checkpoint or 'the latest checkpoint'}",
              file=sys.stderr)
        fn = make_translate_fn(model, tokenizer, args.beam_size or cfg.decode.beam_size,
                               cfg.decode.length_penalty)
        with use_engine(inference_engine(model, "lowprec" if args.lowprec else "emulated")):
            outputs = translate_texts(fn, tokenizer, lines, args.batch_size)
    text = "\n".join(outputs) + ("\n" if outputs else "")
    if args.output:
        write_text_atomic(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from tf_nmt.quantization.commands import run_quantize

    run_quantize(args)
    return 0


def _quantized_export_conflicts(args: argparse.Namespace) -> List[str]:
    """The options ``export --quantized FILE`` would ignore: the policy comes from the file."""
    given = {"--bits": args.bits is not None, "--kind": args.kind is not None,
             "--scale": args.scale is not None, "--quantize-biases": args.quantize_biases,
             "--run-dir": args.run_dir is not None, "--checkpoint": args.checkpoint is not None,
             "--weights": args.weights is not None}
    return [flag for flag, set_ in given.items() if set_]


CTRANSLATE2_IGNORED = {"--quantized": "quantized", "--bits": "bits", "--kind": "kind",
                       "--scale": "scale", "--quantize-biases": "quantize_biases",
                       "--chunk-size": "chunk_size"}  # what export --format ctranslate2 ignores


def _export_ctranslate2(args: argparse.Namespace) -> int:
    """``export --format ctranslate2``: a CTranslate2 model directory (tf_nmt.export.ctranslate2)."""
    ignored = [flag for flag, name in CTRANSLATE2_IGNORED.items()
               if getattr(args, name) not in (None, False)]
    if ignored:
        raise UsageError(f"export --format ctranslate2: {', '.join(ignored)} would be ignored "
                         "(CTranslate2 quantises with --quantization and batches itself)")
    if args.run_dir is None:
        raise UsageError("export --format ctranslate2 needs --run-dir")
    from tf_nmt.export.ctranslate2 import export_ctranslate2
    from tf_nmt.run_dir import RunDir, choose_weights, load_trained_checkpoint

    checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
    model, tokenizer, cfg, prefix = load_trained_checkpoint(Path(args.run_dir), checkpoint,
                                                            weights)
    if args.beam_size:
        cfg.decode.beam_size = args.beam_size  # recorded as the export's default beam
    if Path(args.export_dir).exists() and not args.overwrite:  # before counting the train data
        raise UsageError(f"{args.export_dir} exists; pass --overwrite to replace it")
    vmap = _ctranslate2_vmap(args, cfg, tokenizer)
    path = export_ctranslate2(model, tokenizer, cfg, Path(args.export_dir),
                              quantization=args.quantization or "float32",
                              overwrite=args.overwrite, run_dir=Path(args.run_dir),
                              checkpoint=prefix, weights=weights,
                              languages=RunDir(Path(args.run_dir)).languages(), vmap=vmap)
    print(f"exported CTranslate2 model to {path} ({args.quantization or 'float32'} weights, "
          f"{weights} weights of {prefix}); translate with: tf-nmt translate --export-dir {path}")
    return 0


def _ctranslate2_vmap(args: argparse.Namespace, cfg, tokenizer):
    """(text, summary) of the export's vocabulary map from the run's training pairs, or None
    (``--no-vmap``, or by default where the training data is absent: printed)."""
    from tf_nmt.export.ct2_vmap import VMAP_BY_DEFAULT, build_vmap, training_pairs
    from tf_nmt.export.ctranslate2 import SPECIAL_TOKENS, vocabulary_tokens

    wanted = VMAP_BY_DEFAULT if args.vmap is None else args.vmap
    if not wanted:
        return None
    if not getattr(tokenizer, "shared", True):  # separate source/target Vocabularies
        raise UsageError("--vmap maps one shared vocabulary; this run has separate source and "
                         "target vocabularies: export it without --vmap")
    data_dir = Path(cfg.data.data_dir)
    pairs = training_pairs(data_dir, tokenizer)
    try:
        first = next(pairs, None)  # opens the data: a missing corpus fails here
    except (UserError, OSError) as err:
        if args.vmap:
            raise UsageError(f"--vmap needs the run's training data: {err}") from None
        print(f"no vocabulary map: the training data is not readable ({err}); the export "
              "decodes over the whole vocabulary", file=sys.stderr)
        return None
    if first is None:
        raise UsageError(f"{data_dir} has no training pairs to build a vocabulary map from; "
                         "export with --no-vmap")
    target = getattr(tokenizer, "target", tokenizer)  # separate Vocabularies or one tokenizer
    source = getattr(tokenizer, "source", tokenizer)
    text, summary = build_vmap(
        itertools.chain([first], pairs), vocabulary_tokens(target.model_proto),
        sorted(SPECIAL_TOKENS), source_tokens=(None if source is target
                                               else vocabulary_tokens(source.model_proto)))
    summary["data_dir"] = str(data_dir.resolve())
    print(f"vocabulary map: {summary['always']} pieces always, up to {summary['per_source']} "
          f"per source piece, from {summary['pairs']} training pairs of {data_dir}")
    return text, summary


def cmd_export(args: argparse.Namespace) -> int:
    if args.format == "ctranslate2":
        return _export_ctranslate2(args)
    if args.quantization is not None:
        raise UsageError("--quantization is for --format ctranslate2 (a SavedModel is float32; "
                         "pack low-bit weights with --bits or --quantized)")
    if args.vmap is not None:
        raise UsageError("--vmap/--no-vmap is for --format ctranslate2 (a SavedModel decodes "
                         "over the whole vocabulary)")
    if args.chunk_size is None:
        args.chunk_size = SERVING_CHUNK_SIZE
    conflicts = _quantized_export_conflicts(args) if args.quantized else []
    if conflicts:
        raise UsageError(f"export --quantized {args.quantized}: {', '.join(conflicts)} would be "
                         "ignored (bits, quantiser and scale come from the packed file); drop "
                         "them, or quantise a run on the fly with --run-dir and --bits")
    for name, default in QUANT_DEFAULTS.items():  # unset on the export parser (see above)
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.quantized or args.bits:  # the packed-weight SavedModel (tf_nmt.quantization)
        from tf_nmt.quantization.commands import run_quantized_export

        run_quantized_export(args)
        return 0
    if args.run_dir is None:
        raise UsageError("export needs --run-dir (or --quantized PACKED_FILE)")
    from tf_nmt.export.saved_model import export_saved_model
    from tf_nmt.run_dir import RunDir, choose_weights, load_trained_model

    checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
    model, tokenizer, cfg = load_trained_model(Path(args.run_dir), checkpoint, weights)
    languages = RunDir(Path(args.run_dir)).languages()
    path = export_saved_model(model, tokenizer, Path(args.export_dir),
                              beam_size=args.beam_size or cfg.decode.beam_size,
                              length_penalty=cfg.decode.length_penalty, overwrite=args.overwrite,
                              chunk_size=args.chunk_size, languages=languages)
    record_exported_weights(path, weights, args.run_dir, checkpoint, languages)
    print(f"exported SavedModel to {path} (signature serving_default: texts -> translations; "
          f"{weights} weights)")
    quant = getattr(model, "activation_quantization", None)
    if quant is not None:
        print(f"matmul inputs log-quantised ({quant.bits} bits, fixed scale {quant.scale:g}) with "
              "stock TensorFlow ops, as evaluated: serving needs no tf_nmt op library")
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from tf_nmt.models.ema import checkpoint_has_ema
    from tf_nmt.training.checkpoints import average_checkpoints, list_checkpoints
    from tf_nmt.run_dir import RunDir, RunDirError, load_trained_model

    run = RunDir(Path(args.run_dir))
    prefixes = list_checkpoints(run.checkpoints)[-args.last:]
    if len(prefixes) < args.last:
        raise RunDirError(f"asked to average the last {args.last} checkpoints but "
                         f"{run.checkpoints} holds {len(prefixes)}")
    # no --weights: the EMA where every checkpoint holds one (as choose_weights for one)
    weights = args.weights or ("ema" if all(map(checkpoint_has_ema, prefixes)) else "raw")
    model, _, _ = load_trained_model(run.root)
    out = average_checkpoints(model, prefixes, Path(args.output_dir), overwrite=args.overwrite,
                              weights=weights)
    print(f"averaged the {weights} weights of {len(prefixes)} checkpoints into "
          f"{out}; score it with: tf-nmt evaluate "
          f"--run-dir {run.root} --checkpoint {args.output_dir}")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from tf_nmt.quickstart import run_quickstart

    run_quickstart(Path(args.data_dir), Path(args.run_dir), Path(args.export_dir),
                   args.results, minutes=args.minutes, overrides=args.set,
                   debs_dir=args.debs_dir, fresh=args.fresh, preset_name=args.preset,
                   precision=args.precision, average_last=args.average_last)
    return 0


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="YAML/JSON config file")
    p.add_argument("--preset", help=f"start from a named preset ({', '.join(PRESETS)})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (repeatable), e.g. --set train.train_steps=500")
    p.add_argument("--data-dir", type=Path, help="prepared data directory (overrides data.data_dir)")


CHECKPOINT_HELP = ("checkpoint prefix, or a directory of checkpoints (its latest, e.g. the "
                   "output of average-checkpoints); default: the run's latest")
QUANT_DEFAULTS = {"kind": "log", "scale": "optimised"}  # --kind and --scale when not given


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _add_quant_args(p: argparse.ArgumentParser, bits_default: Optional[int]) -> None:
    p.add_argument("--bits", type=int, default=bits_default, help="bits per weight, 1..8")
    p.add_argument("--kind", default=QUANT_DEFAULTS["kind"], choices=["log", "fixed"],
                   help="quantiser")
    p.add_argument("--scale", default=QUANT_DEFAULTS["scale"],
                   choices=["unscaled", "max", "optimised"])
    p.add_argument("--quantize-biases", action="store_true",
                   help="also quantise biases and layer-norm vectors (default: keep them float32)")


WEIGHTS_HELP = ("which weights of the checkpoint: raw (the trained weights) or ema (their moving "
                "average, kept by runs trained with train.ema_decay > 0, as the quickstart "
                "Transformer is); default: ema where the checkpoint holds it, else raw")
LOWPREC_HELP = ("run the matmuls in the log-space CPU kernels (tf_nmt.ops.lowprec, 4-bit codes; "
                "needs a run trained with train.quantize_activations_bits=4 and the tf_nmt op library)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tf-nmt", description=__doc__.split("\n\n")[0])
    parser.add_argument("--keras", choices=("2", "3"),
                        help="the Keras tf-nmt's models are built on: 2 (tf_keras, the default) "
                             "or 3; the same as the environment variable TF_NMT_KERAS, which "
                             "processes started by horovodrun inherit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare-data", help="build the en-de corpus from Debian packages, or "
                       "your own corpus (--train-*), + vocabulary")
    p.add_argument("--data-dir", type=Path, default=Path("data_cache"))
    p.add_argument("--debs-dir", type=Path, help="directory with already downloaded .deb files")
    p.add_argument("--vocab-size", type=int,
                   help=f"default {own_cli.DEFAULTS['vocab_size']}")
    p.add_argument("--dev-size", type=int, help=f"default {SPLIT_DEFAULTS['dev_size']} (own "
                   f"corpus: {own_cli.DEFAULTS['dev_size']}, carved from train)")
    p.add_argument("--test-size", type=int, help=f"default {SPLIT_DEFAULTS['test_size']} (own "
                   "corpus: no test split)")
    p.add_argument("--seed", type=int, help=f"default {SPLIT_DEFAULTS['seed']}")
    p.add_argument("--force", action="store_true",
                   help="rebuild even if cached, and replace a corpus tf-nmt did not build")
    p.add_argument("--vocab-only", action="store_true",
                   help="only learn the vocabulary of the corpus already in DATA_DIR/corpus "
                        "(your own files), as multi-worker training needs")
    p.add_argument("--stats-json", type=Path, help="write the corpus statistics (own corpus: "
                   "its manifest) to this file")
    own_cli.add_arguments(p)
    p.set_defaults(func=cmd_prepare_data)

    p = sub.add_parser("train", help="train or resume a run with model.fit")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--allow-world-size-change", action="store_true",
                   help="resume checkpoints written by a different number of workers")
    p.add_argument("--elastic", action="store_true",
                   help="elastic training under horovodrun --min-np/--max-np "
                        "--host-discovery-script (state committed every "
                        "train.elastic_commit_every steps; the world size may change)")
    p.add_argument("--quantize-bits", type=int, metavar="B",
                   help="re-train under B-bit quantisation (train.quantize_bits; see train.quantize_*)")
    p.add_argument("--comm", choices=COMM_MODES,
                   help="gradient communication (train.comm; graddrop/fedavg/bmuf options are "
                        "train.drop_ratio, train.local_gradients, train.average_every, ...)")
    p.add_argument("--init-from", metavar="PARENT",
                   help="initialise a fresh run from a parent run dir or checkpoint prefix "
                        "(train.init_from; ignored on resume)")
    p.add_argument("--embeddings", choices=["token-match", "exclude", "random", "frequency"],
                   help="how parent embedding rows initialise the child's (train.init_embeddings)")
    p.add_argument("--no-warmup", action="store_true",
                   help="with --init-from: drop the learning-rate warm-up (train.init_warmup=false)")
    _add_config_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("train-async", help="asynchronous SGD on a local parameter-server cluster")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--workers", type=int, default=2, help="worker processes (plus one ps)")
    p.add_argument("--k", type=int, default=1,
                   help="pushes the server accumulates (summed) per update; 1 = plain async")
    p.add_argument("--synchronous", action="store_true",
                   help="rounds of k pushes, each round waited for (synchronous SGD)")
    p.add_argument("--refresh-every", type=int, default=0, metavar="U",
                   help="artificial staleness: gradients on parameters pulled every U updates")
    p.add_argument("--n-push", type=int, default=1,
                   help="Downpour: a worker pushes the mean of its last N gradients")
    p.add_argument("--n-fetch", type=int, default=1,
                   help="Downpour: a worker fetches the parameters every N of its steps "
                        "(with train.clip_norm: each gradient clipped to that global norm)")
    p.add_argument("--progress-every", type=float, default=60.0, metavar="SECONDS",
                   help="log the server's push and update counts this often (0: at the end only)")
    _add_config_args(p)
    p.set_defaults(func=cmd_train_async)

    p = sub.add_parser("evaluate", help="beam-search translate a split and score it with sacreBLEU")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("--data-dir", type=Path)
    p.add_argument("--beam-size", type=int)
    p.add_argument("--length-penalty", type=float)
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    p.add_argument("--output-json", type=Path)
    p.add_argument("--lowprec", action="store_true", help=LOWPREC_HELP)
    p.add_argument("--weights", choices=["raw", "ema"], help=WEIGHTS_HELP)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("translate", help="translate lines of source-language text (file or stdin) with a run or an export")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run-dir", type=Path)
    src.add_argument("--export-dir", type=Path,
                     help="an export: a SavedModel, or a CTranslate2 directory (export --format "
                          "ctranslate2; needs the ctranslate2 package), told apart by its files")
    p.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument("--output", help="output file (default stdout)")
    p.add_argument("--beam-size", type=int,
                   help="beam width (default: the run's or export's decode.beam_size; with a "
                        "CTranslate2 export, CTranslate2's beam search and length penalty)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="sentences per length-sorted batch (output stays in input order)")
    p.add_argument("--lowprec", action="store_true", help=LOWPREC_HELP)
    p.add_argument("--weights", choices=["raw", "ema"], help=WEIGHTS_HELP + " (with --run-dir)")
    p.add_argument("--vmap", action=argparse.BooleanOptionalAction, default=None,
                   help="CTranslate2 export only: restrict each batch's output vocabulary to the "
                        "export's vocabulary map (default: when the export has one)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("export", help="write a string-to-string SavedModel (or, with --format "
                       "ctranslate2, a CTranslate2 model directory)")
    p.add_argument("--run-dir", type=Path)
    p.add_argument("--quantized", type=Path, metavar="PACKED_FILE",
                   help="export a packed model (from tf-nmt quantize) with packed on-disk weights")
    _add_quant_args(p, bits_default=None)
    p.set_defaults(kind=None, scale=None)  # so that cmd_export sees what was given
    p.add_argument("--export-dir", type=Path, required=True)
    p.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("--beam-size", type=int)
    p.add_argument("--chunk-size", type=_non_negative_int, default=None,
                   help="decode each request in length-sorted chunks of N sentences "
                        f"(0: the whole request at once; default {SERVING_CHUNK_SIZE})")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--weights", choices=["raw", "ema"], help=WEIGHTS_HELP)
    p.add_argument("--format", choices=["savedmodel", "ctranslate2"], default="savedmodel",
                   help="savedmodel (default): the string-to-string SavedModel; ctranslate2: a "
                        "CTranslate2 model directory with the SentencePiece model (Transformer "
                        "runs; needs pip install 'tf-nmt[ctranslate2]')")
    p.add_argument("--quantization", choices=["float32", "int8", "int8_float32"],
                   help="--format ctranslate2 only: CTranslate2's weight type (default float32)")
    p.add_argument("--vmap", action=argparse.BooleanOptionalAction, default=None,
                   help="--format ctranslate2 only: write a vocabulary map (a lexical shortlist "
                        "per source piece, counted on the run's training pairs) that translate "
                        "uses to shrink the output layer")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("quantize", help="quantise a run's checkpoint to a packed B-bit file")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("--output", type=Path, required=True, help="packed model file to write")
    _add_quant_args(p, bits_default=4)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--report-json", type=Path, help="also write the per-tensor size report here")
    p.add_argument("--show", type=int, default=0, help="print only the first N tensor rows")
    p.add_argument("--weights", choices=["raw", "ema"], help=WEIGHTS_HELP)
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("average-checkpoints", help="average the last N checkpoints of a run")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--weights", choices=["raw", "ema"],
                   help=WEIGHTS_HELP + "; the average is written as the raw weights of a new "
                        "checkpoint")
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("quickstart", help="prepare-data → train → BLEU → export, with a time budget")
    p.add_argument("--data-dir", type=Path, default=Path("data_cache"))
    p.add_argument("--debs-dir", type=Path)
    p.add_argument("--run-dir", type=Path, default=Path("runs/quickstart"))
    p.add_argument("--export-dir", type=Path, default=Path("runs/quickstart-export"))
    p.add_argument("--results", type=Path,
                   help="where to write the run's record (default: RUN_DIR/quickstart.json)")
    # The quickstart's presets: its 45-minute budget on 2 cores fits these, not the WMT ones.
    p.add_argument("--preset", default="quickstart", choices=["quickstart", "gnmt-small"],
                   help="the model and recipe: the Transformer (default) or the GNMT LSTM")
    p.add_argument("--precision", default="auto", choices=QUICKSTART_PRECISIONS,
                   help="auto (default): time float32 and mixed bfloat16 training steps on this "
                        "machine first (about a minute) and train with the faster")
    p.add_argument("--minutes", type=float, default=None,
                   help=f"training time budget (default {QUICKSTART_MINUTES:g}: the whole job "
                        "stays under ~60 min on 2 cores)")
    p.add_argument("--average-last", type=int, default=None, metavar="K",
                   help="score and export the average of the last K checkpoints (1: the last "
                        "checkpoint alone; default: "
                        f"{QUICKSTART_AVERAGE_LAST['ema']} where the run keeps a weight EMA, "
                        f"as the quickstart Transformer does, else {QUICKSTART_AVERAGE_LAST['raw']})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--fresh", action="store_true",
                   help="when --run-dir already holds a run, train a new one in "
                        "<run-dir>-<timestamp> (without it an existing run is refused)")
    p.set_defaults(func=cmd_quickstart)

    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """The ``tf-nmt`` command. With ``argv`` None (the real command line) the process first
    re-executes itself with tcmalloc preloaded where installed (:mod:`tf_nmt.utils.allocator`)."""
    if argv is None:
        try:
            allocator.reexec_with_tcmalloc(sys.orig_argv)
        except (ValueError, FileNotFoundError) as err:
            print(f"tf-nmt: error: {err}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        if args.keras:
            choose_keras(args.keras)
        return args.func(args)
    except KeyboardInterrupt:
        print("tf-nmt: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 — expected errors become one clear line
        if _is_user_error(err):
            print(f"tf-nmt: error: {err}", file=sys.stderr)
            return 2
        raise


def choose_keras(version: str) -> None:
    """``--keras``: set ``TF_NMT_KERAS`` before tf-nmt's models are first imported (a process
    that already imported them with the other version cannot switch)."""
    import os

    compat = sys.modules.get("tf_nmt.compat")
    if compat is not None and str(compat.KERAS_VERSION) != version:
        raise UsageError(f"--keras {version}: this process already uses Keras "
                         f"{compat.KERAS_VERSION} for tf-nmt's models (TF_NMT_KERAS)")
    os.environ["TF_NMT_KERAS"] = version


def _is_user_error(err: Exception) -> bool:
    """Errors about the user's input (printed as one line); everything else keeps its traceback."""
    return isinstance(err, (UserError, FileExistsError, FileNotFoundError, NotADirectoryError))


if __name__ == "__main__":
    sys.exit(main())
