"""The bodies of ``tf-nmt quantize`` and ``tf-nmt export --quantized/--bits`` (kept here so the
shared CLI module only parses arguments)."""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict

from tf_nmt.data.prepared import BUILTIN_LANGUAGES
from tf_nmt.errors import UsageError
from tf_nmt.export.saved_model import directory_bytes, export_saved_model
from tf_nmt.quantization.packed_file import read_packed, write_packed
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import format_report
from tf_nmt.quantization.runs import model_from_packed, quantize_run
from tf_nmt.quantization.saved_model import export_packed_saved_model, variables_bytes
from tf_nmt.run_dir import choose_weights
from tf_nmt.utils.io import write_json_atomic


def policy_from_args(args: argparse.Namespace) -> QuantPolicy:
    return QuantPolicy(bits=args.bits, kind=args.kind, scale=args.scale,
                       quantize_biases=args.quantize_biases)


def run_quantize(args: argparse.Namespace) -> Dict[str, Any]:
    """Quantise a run's checkpoint, print the size table, write the packed file (+ JSON report)."""
    output = Path(args.output)
    if output.exists() and not args.overwrite:  # fail before the (slow) quantisation
        raise FileExistsError(f"{output} exists; pass --overwrite to replace it")
    checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
    packed, report = quantize_run(Path(args.run_dir), policy_from_args(args), checkpoint,
                                  weights=weights)
    print(format_report(report, max_rows=args.show))
    report["file_bytes"] = write_packed(output, packed, overwrite=args.overwrite)
    report["output"] = str(output)
    t = report["total"]
    print(f"wrote {output}: {report['file_bytes']:,} bytes = packed weights {t['stored_bytes']:,} B "
          f"({t['ratio']:.2f}x smaller than {t['fp32_bytes']:,} B float32) + vocabulary, config, header")
    if args.report_json:
        write_json_atomic(Path(args.report_json), report)
    return report


def export_sizes(model, tokenizer, export_dir: Path, beam_size: int, length_penalty: float) -> Dict[str, Any]:
    """Sizes of the packed export against a float32 export of the same (dequantised) model,
    written to a temporary directory and removed again."""
    tmp = Path(tempfile.mkdtemp(prefix=".fp32-export.", dir=Path(export_dir).parent))
    try:
        export_saved_model(model, tokenizer, tmp / "fp32", beam_size, length_penalty)
        sizes = {"fp32_total_bytes": directory_bytes(tmp / "fp32"),
                 "fp32_variables_bytes": variables_bytes(tmp / "fp32")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sizes.update(packed_total_bytes=directory_bytes(export_dir),
                 packed_variables_bytes=variables_bytes(export_dir))
    sizes["total_ratio"] = sizes["fp32_total_bytes"] / sizes["packed_total_bytes"]
    sizes["variables_ratio"] = sizes["fp32_variables_bytes"] / sizes["packed_variables_bytes"]
    return sizes


def run_quantized_export(args: argparse.Namespace) -> Dict[str, Any]:
    """Export a packed file (``--quantized``) or a run quantised on the fly (``--bits``)."""
    if args.quantized:
        packed = read_packed(Path(args.quantized))
    elif args.run_dir:
        checkpoint, weights = choose_weights(Path(args.run_dir), args.checkpoint, args.weights)
        packed, _ = quantize_run(Path(args.run_dir), policy_from_args(args), checkpoint,
                                 weights=weights)
    else:
        raise UsageError("export needs --run-dir (with --bits) or --quantized PACKED_FILE")
    model, tokenizer, cfg = model_from_packed(packed)
    beam = args.beam_size or cfg.decode.beam_size
    path = export_packed_saved_model(model, tokenizer, packed, Path(args.export_dir), beam,
                                     cfg.decode.length_penalty, overwrite=args.overwrite,
                                     chunk_size=args.chunk_size,
                                     # packed files from before own corpora hold en-de models
                                     languages=packed.info.get("languages", BUILTIN_LANGUAGES))
    sizes = export_sizes(model, tokenizer, path, beam, cfg.decode.length_penalty)
    print(f"exported the {packed.policy.bits}-bit {packed.policy.kind} SavedModel to {path} "
          f"(signature serving_default: texts -> translations)")
    print(f"size: {sizes['packed_total_bytes']:,} B vs {sizes['fp32_total_bytes']:,} B for the float32 "
          f"export ({sizes['total_ratio']:.2f}x smaller); variables {sizes['packed_variables_bytes']:,} B "
          f"vs {sizes['fp32_variables_bytes']:,} B ({sizes['variables_ratio']:.2f}x)")
    return sizes
