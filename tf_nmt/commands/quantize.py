"""``tf-nmt quantize`` (a run's checkpoint to a packed B-bit file) and ``tf-nmt export
--quantized/--bits`` (the packed-weight SavedModel)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional

from tf_nmt.commands.quantized_runs import model_from_packed, quantize_run
from tf_nmt.data.prepared import BUILTIN_LANGUAGES
from tf_nmt.errors import UsageError
from tf_nmt.export.packed_saved_model import export_packed_saved_model, variables_bytes
from tf_nmt.export.saved_model import directory_bytes, export_record, export_saved_model
from tf_nmt.inference.formats import SERVING_CHUNK_SIZE
from tf_nmt.quantization.packed_file import read_packed, write_packed
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import format_report
from tf_nmt.utils.io import write_json_atomic


def quantize(run_dir: Path, output: Path, policy: QuantPolicy, checkpoint: Optional[str] = None,
             weights: Optional[str] = None, overwrite: bool = False,
             report_json: Optional[Path] = None, show: int = 0) -> Dict[str, Any]:
    """Quantise a run's checkpoint (``weights`` None: the EMA where it holds one), print the
    size table (``show``: its first N tensor rows, 0: all), write the packed file (and the JSON
    report to ``report_json``); returns the report."""
    output = Path(output)
    if output.exists() and not overwrite:  # fail before the (slow) quantisation
        raise FileExistsError(f"{output} exists; pass --overwrite to replace it")
    packed, report = quantize_run(Path(run_dir), policy, checkpoint, weights=weights)
    print(format_report(report, max_rows=show))
    report["file_bytes"] = write_packed(output, packed, overwrite=overwrite)
    report["output"] = str(output)
    t = report["total"]
    print(f"wrote {output}: {report['file_bytes']:,} bytes = packed weights {t['stored_bytes']:,} B "
          f"({t['ratio']:.2f}x smaller than {t['fp32_bytes']:,} B float32) + vocabulary, config, header")
    if report_json:
        write_json_atomic(Path(report_json), report)
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


def export_packed(export_dir: Path, packed_file: Optional[Path] = None,
                  run_dir: Optional[Path] = None, policy: Optional[QuantPolicy] = None,
                  checkpoint: Optional[str] = None, weights: Optional[str] = None,
                  beam_size: Optional[int] = None, chunk_size: int = SERVING_CHUNK_SIZE,
                  overwrite: bool = False) -> Dict[str, Any]:
    """Export a packed file (``packed_file``) or a run quantised on the fly (``run_dir`` and
    ``policy``) as the packed-weight SavedModel; returns its sizes against float32."""
    if packed_file:
        packed = read_packed(Path(packed_file))
    elif run_dir and policy is not None:
        packed, _ = quantize_run(Path(run_dir), policy, checkpoint, weights=weights)
    else:
        raise UsageError("export needs --run-dir (with --bits) or --quantized PACKED_FILE")
    model, tokenizer, cfg = model_from_packed(packed)
    beam = beam_size or cfg.decode.beam_size
    # packed files from before own corpora hold en-de models
    languages = packed.info.get("languages", BUILTIN_LANGUAGES)
    record = export_record(packed.info.get("weights"), run_dir,
                           packed.info.get("source_checkpoint"), languages,
                           packed_file=None if packed_file is None else str(packed_file),
                           bits=packed.policy.bits, kind=packed.policy.kind)
    path = export_packed_saved_model(model, tokenizer, packed, Path(export_dir), beam,
                                     cfg.decode.length_penalty, overwrite=overwrite,
                                     chunk_size=chunk_size, languages=languages, record=record)
    sizes = export_sizes(model, tokenizer, path, beam, cfg.decode.length_penalty)
    print(f"exported the {packed.policy.bits}-bit {packed.policy.kind} SavedModel to {path} "
          f"(signature serving_default: texts -> translations)")
    print(f"size: {sizes['packed_total_bytes']:,} B vs {sizes['fp32_total_bytes']:,} B for the float32 "
          f"export ({sizes['total_ratio']:.2f}x smaller); variables {sizes['packed_variables_bytes']:,} B "
          f"vs {sizes['fp32_variables_bytes']:,} B ({sizes['variables_ratio']:.2f}x)")
    return sizes
