"""The ``tf-nmt`` command line: prepare-data, train, evaluate, translate, export,
average-checkpoints, convert-keras, plan and quickstart (the whole main job).

Heavy imports (TensorFlow) happen inside the subcommands so ``tf-nmt --help`` is instant.
Expected failures (bad config, bad corpus, mismatched resume, existing outputs, divergence)
are reported as one clear ``tf-nmt: error: ...`` line with exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional

from tf_nmt.config import (COMM_MODES, PRESETS, QUICKSTART_AVERAGE_LAST, QUICKSTART_MINUTES,
                           QUICKSTART_PRECISIONS)
from tf_nmt.data.builtin_corpus.builder import SPLIT_DEFAULTS
from tf_nmt.data.own_corpus import cli_args as own_cli
from tf_nmt.commands.keras import KERAS_CHOICES, choose_keras, pick_keras
from tf_nmt.errors import UsageError, UserError
from tf_nmt.inference.formats import SERVING_CHUNK_SIZE
from tf_nmt.utils import allocator, quiet


def _config(args: argparse.Namespace, **keys: Any):
    """The run's configuration from --preset, --config, --set, --data-dir and the verb's own
    flags (``keys``: dotted key -> the flag's value, None when not given)."""
    from tf_nmt.commands.train import build_config

    return build_config(getattr(args, "preset", None), args.config, args.set,
                        getattr(args, "data_dir", None), keys)


def cmd_prepare_data(args: argparse.Namespace) -> int:
    from tf_nmt.commands.prepare import prepare_builtin, prepare_own_corpus

    if own_cli.own_corpus_given(args):
        prepare_own_corpus(own_cli.options_from_args(args), args.stats_json)
        return 0
    own_cli.refuse_for_builtin(args)
    prepare_builtin(args.data_dir, vocab_size=args.vocab_size, debs_dir=args.debs_dir,
                    dev_size=args.dev_size, test_size=args.test_size, seed=args.seed,
                    force=args.force, vocab_only=args.vocab_only, stats_json=args.stats_json)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from tf_nmt.commands.train import train

    cfg = _config(args, **{
        "train.quantize_bits": args.quantize_bits, "train.comm": args.comm,
        "train.init_from": None if args.init_from is None else str(args.init_from),
        "train.init_embeddings": args.embeddings,
        "train.init_warmup": False if args.no_warmup else None})
    train(cfg, args.run_dir, elastic=args.elastic,
          allow_world_size_change=args.allow_world_size_change)
    return 0


def cmd_convert_keras(args: argparse.Namespace) -> int:
    from tf_nmt.commands.convert import convert_keras

    convert_keras(args.run_dir, args.output_dir)
    return 0


def cmd_train_async(args: argparse.Namespace) -> int:
    from tf_nmt.commands.train import train_async

    train_async(_config(args), args.run_dir, workers=args.workers, k=args.k,
                synchronous=args.synchronous, refresh_every=args.refresh_every,
                n_push=args.n_push, n_fetch=args.n_fetch, progress_every=args.progress_every)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from tf_nmt.commands.evaluate import evaluate

    evaluate(args.run_dir, split=args.split, checkpoint=args.checkpoint, data_dir=args.data_dir,
             beam_size=args.beam_size, length_penalty=args.length_penalty, limit=args.limit,
             lowprec=args.lowprec, weights=args.weights, output_json=args.output_json)
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from tf_nmt.commands.translate import translate

    translate(args.input, args.output, run_dir=args.run_dir, export_dir=args.export_dir,
              checkpoint=args.checkpoint, weights=args.weights, beam_size=args.beam_size,
              batch_size=args.batch_size, lowprec=args.lowprec, vmap=args.vmap)
    return 0


def _policy(args: argparse.Namespace):
    from tf_nmt.quantization.policy import QuantPolicy

    return QuantPolicy(bits=args.bits, kind=args.kind, scale=args.scale,
                       quantize_biases=args.quantize_biases)


def cmd_quantize(args: argparse.Namespace) -> int:
    from tf_nmt.commands.quantize import quantize

    quantize(args.run_dir, args.output, _policy(args), checkpoint=args.checkpoint,
             weights=args.weights, overwrite=args.overwrite, report_json=args.report_json,
             show=args.show)
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
    """``export --format ctranslate2``: a CTranslate2 model directory."""
    ignored = [flag for flag, name in CTRANSLATE2_IGNORED.items()
               if getattr(args, name) not in (None, False)]
    if ignored:
        raise UsageError(f"export --format ctranslate2: {', '.join(ignored)} would be ignored "
                         "(CTranslate2 quantises with --quantization and batches itself)")
    if args.run_dir is None:
        raise UsageError("export --format ctranslate2 needs --run-dir")
    from tf_nmt.commands.export import export_ctranslate2

    export_ctranslate2(args.run_dir, args.export_dir, checkpoint=args.checkpoint,
                       weights=args.weights, beam_size=args.beam_size,
                       quantization=args.quantization or "float32", overwrite=args.overwrite,
                       vmap=args.vmap)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.format == "ctranslate2":
        return _export_ctranslate2(args)
    if args.quantization is not None:
        raise UsageError("--quantization is for --format ctranslate2 (a SavedModel is float32; "
                         "pack low-bit weights with --bits or --quantized)")
    if args.vmap is not None:
        raise UsageError("--vmap/--no-vmap is for --format ctranslate2 (a SavedModel decodes "
                         "over the whole vocabulary)")
    chunk_size = SERVING_CHUNK_SIZE if args.chunk_size is None else args.chunk_size
    conflicts = _quantized_export_conflicts(args) if args.quantized else []
    if conflicts:
        raise UsageError(f"export --quantized {args.quantized}: {', '.join(conflicts)} would be "
                         "ignored (bits, quantiser and scale come from the packed file); drop "
                         "them, or quantise a run on the fly with --run-dir and --bits")
    for name, default in QUANT_DEFAULTS.items():  # unset on the export parser (see above)
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.quantized or args.bits:  # the packed-weight SavedModel
        from tf_nmt.commands.quantize import export_packed

        export_packed(args.export_dir, packed_file=args.quantized, run_dir=args.run_dir,
                      policy=_policy(args) if args.bits else None, checkpoint=args.checkpoint,
                      weights=args.weights, beam_size=args.beam_size, chunk_size=chunk_size,
                      overwrite=args.overwrite)
        return 0
    if args.run_dir is None:
        raise UsageError("export needs --run-dir (or --quantized PACKED_FILE)")
    from tf_nmt.commands.export import export_saved_model

    export_saved_model(args.run_dir, args.export_dir, checkpoint=args.checkpoint,
                       weights=args.weights, beam_size=args.beam_size, chunk_size=chunk_size,
                       overwrite=args.overwrite)
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from tf_nmt.commands.average import average

    average(args.run_dir, args.last, args.output_dir, overwrite=args.overwrite,
            weights=args.weights)
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from tf_nmt.commands.quickstart import run_quickstart

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


def _add_prepare_data(sub) -> None:
    """``tf-nmt prepare-data``."""
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


def _add_train(sub) -> None:
    """``tf-nmt train``."""
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


def _add_train_async(sub) -> None:
    """``tf-nmt train-async``."""
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


def _add_evaluate(sub) -> None:
    """``tf-nmt evaluate``."""
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


def _add_translate(sub) -> None:
    """``tf-nmt translate``."""
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


def _add_export(sub) -> None:
    """``tf-nmt export``."""
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


def _add_quantize(sub) -> None:
    """``tf-nmt quantize``."""
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


def _add_average_checkpoints(sub) -> None:
    """``tf-nmt average-checkpoints``."""
    p = sub.add_parser("average-checkpoints", help="average the last N checkpoints of a run")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--weights", choices=["raw", "ema"],
                   help=WEIGHTS_HELP + "; the average is written as the raw weights of a new "
                        "checkpoint")
    p.set_defaults(func=cmd_average)


def _add_convert_keras(sub) -> None:
    """``tf-nmt convert-keras``."""
    p = sub.add_parser("convert-keras",
                       help="convert a run trained on one Keras version to this process's "
                            "(--keras / TF_NMT_KERAS): checkpoints, EMA and optimizer state")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--output-dir", type=Path, required=True,
                   help="the converted run's directory (must not exist)")
    p.set_defaults(func=cmd_convert_keras)


def _add_quickstart(sub) -> None:
    """``tf-nmt quickstart``."""
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


def _add_plan(sub) -> None:
    """``tf-nmt plan``: its flags are declared beside the command (no TensorFlow loaded)."""
    from tf_nmt.commands.plan import add_plan_parser

    add_plan_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tf-nmt", description=__doc__.split("\n\n")[0])
    parser.add_argument("--keras", choices=KERAS_CHOICES,
                        help="the Keras tf-nmt's models are built on: 3 (the default) or 2 "
                             "(tf_keras); the same as the environment variable TF_NMT_KERAS, "
                             "which processes started by horovodrun inherit. Without either, a "
                             "command on an existing run uses the run's Keras, and train-async "
                             "Keras 2")
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's and SentencePiece's start-up log lines (no CUDA "
                             "driver, oneDNN, CPU instructions, SentencePiece's normaliser), "
                             "hidden by default; real warnings and errors are always shown")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_prepare_data(sub)
    _add_train(sub)
    _add_train_async(sub)
    _add_evaluate(sub)
    _add_translate(sub)
    _add_export(sub)
    _add_quantize(sub)
    _add_average_checkpoints(sub)
    _add_convert_keras(sub)
    _add_quickstart(sub)
    _add_plan(sub)
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
    if argv is None and not args.verbose:  # before TensorFlow loads; children inherit it
        quiet.hide_startup_noise()
    try:
        if args.keras:
            choose_keras(args.keras)
        else:
            pick_keras(args.command, getattr(args, "run_dir", None))
        return args.func(args)
    except KeyboardInterrupt:
        print("tf-nmt: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 — expected errors become one clear line
        if _is_user_error(err):
            print(f"tf-nmt: error: {err}", file=sys.stderr)
            return 2
        raise


def _is_user_error(err: Exception) -> bool:
    """Errors about the user's input (printed as one line); everything else keeps its traceback."""
    return isinstance(err, (UserError, FileExistsError, FileNotFoundError, NotADirectoryError))


if __name__ == "__main__":
    sys.exit(main())
