"""``tf-nmt export``: a run's weights as a string-to-string SavedModel (float32, or packed
low-bit weights) or as a CTranslate2 model directory. Each exporter writes its own record of
what it holds (weights, run, checkpoint, languages)."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from tf_nmt.errors import UsageError, UserError
from tf_nmt.inference.formats import SERVING_CHUNK_SIZE


def export_saved_model(run_dir: Path, export_dir: Path, checkpoint: Optional[str] = None,
                       weights: Optional[str] = None, beam_size: Optional[int] = None,
                       chunk_size: int = SERVING_CHUNK_SIZE, overwrite: bool = False,
                       **record: Any) -> Path:
    """The float32 SavedModel of a run's checkpoint (``weights`` None: the EMA where it holds
    one; ``beam_size`` None: the run's ``decode.beam_size``; ``record``: more keys for the
    export's record, e.g. the checkpoints an average was made of)."""
    from tf_nmt.export.saved_model import export_record
    from tf_nmt.export.saved_model import export_saved_model as write
    from tf_nmt.run_dir import RunDir, load_run

    if chunk_size < 0:
        raise UsageError(f"--chunk-size must be >= 0 (0: each request whole), got {chunk_size}")
    if Path(export_dir).exists() and not overwrite:  # before loading anything
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    run = load_run(Path(run_dir), checkpoint, weights)
    languages = RunDir(Path(run_dir)).languages()
    path = write(run.model, run.tokenizer, Path(export_dir),
                 beam_size=beam_size or run.cfg.decode.beam_size,
                 length_penalty=run.cfg.decode.length_penalty, overwrite=overwrite,
                 chunk_size=chunk_size, languages=languages,
                 record=export_record(run.weights, Path(run_dir), run.checkpoint, languages,
                                      **record))
    print(f"exported SavedModel to {path} (signature serving_default: texts -> translations; "
          f"{run.weights} weights of {run.checkpoint})")
    quant = getattr(run.model, "activation_quantization", None)
    if quant is not None:
        print(f"matmul inputs log-quantised ({quant.bits} bits, fixed scale {quant.scale:g}) with "
              "stock TensorFlow ops, as evaluated: serving needs no tf_nmt op library")
    return path


def export_ctranslate2(run_dir: Path, export_dir: Path, checkpoint: Optional[str] = None,
                       weights: Optional[str] = None, beam_size: Optional[int] = None,
                       quantization: str = "float32", overwrite: bool = False,
                       vmap: Optional[bool] = None) -> Path:
    """A CTranslate2 model directory of a Transformer run's checkpoint (``quantization``:
    CTranslate2's weight type; ``vmap``: write a vocabulary map from the run's training pairs,
    None: :data:`~tf_nmt.export.ct2_vmap.VMAP_BY_DEFAULT`)."""
    from tf_nmt.export.ctranslate2 import export_ctranslate2 as write
    from tf_nmt.run_dir import RunDir, load_run

    run = load_run(Path(run_dir), checkpoint, weights)
    if beam_size:
        run.cfg.decode.beam_size = beam_size  # recorded as the export's default beam
    if Path(export_dir).exists() and not overwrite:  # before counting the train data
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    vocabulary_map = run_vmap(Path(run_dir), run.cfg, run.tokenizer, vmap)
    path = write(run.model, run.tokenizer, run.cfg, Path(export_dir), quantization=quantization,
                 overwrite=overwrite, run_dir=Path(run_dir), checkpoint=run.checkpoint,
                 weights=run.weights, languages=RunDir(Path(run_dir)).languages(),
                 vmap=vocabulary_map)
    print(f"exported CTranslate2 model to {path} ({quantization} weights, {run.weights} weights "
          f"of {run.checkpoint}); translate with: tf-nmt translate --export-dir {path}")
    return path


def run_vmap(run_dir: Path, cfg, tokenizer, wanted: Optional[bool]
             ) -> Optional[Tuple[str, Dict[str, Any]]]:
    """(text, summary) of the export's vocabulary map, counted on the run's training pairs, or
    None (``wanted`` False; or None, the default, :data:`~tf_nmt.export.ct2_vmap.VMAP_BY_DEFAULT`,
    and where the training data is absent: printed). The data directory must hold the run's
    languages and vocabularies (its ids are read as the run's pieces): refused in one line."""
    from tf_nmt.data.prepared import read_prepared
    from tf_nmt.export.ct2_vmap import VMAP_BY_DEFAULT, build_vmap, training_pairs
    from tf_nmt.export.ctranslate2 import vocabulary_tokens
    from tf_nmt.inference.formats import SPECIAL_TOKENS
    from tf_nmt.run_dir import RunDir, check_data_matches

    if not (VMAP_BY_DEFAULT if wanted is None else wanted):
        return None
    data_dir = Path(cfg.data.data_dir)
    try:
        prepared = read_prepared(data_dir)
        check_data_matches(prepared, RunDir(Path(run_dir)), tokenizer,
                           "the vocabulary map would map other pieces; export with --no-vmap, "
                           "or give the run its own data dir back")
        pairs = training_pairs(prepared, tokenizer)
        first = next(pairs, None)  # opens the data: a missing corpus fails here
    except (UserError, OSError) as err:
        if wanted:
            raise UsageError(f"--vmap needs the run's training data: {err}") from None
        print(f"no vocabulary map: the training data is not readable ({err}); the export "
              "decodes over the whole vocabulary", file=sys.stderr)
        return None
    if first is None:
        raise UsageError(f"{data_dir} has no training pairs to build a vocabulary map from; "
                         "export with --no-vmap")
    target = getattr(tokenizer, "target", tokenizer)  # separate TokenizerPair or one tokenizer
    source = getattr(tokenizer, "source", tokenizer)
    text, summary = build_vmap(
        itertools.chain([first], pairs), vocabulary_tokens(target.model_proto),
        sorted(SPECIAL_TOKENS), source_tokens=(None if source is target
                                               else vocabulary_tokens(source.model_proto)))
    summary["data_dir"] = str(data_dir.resolve())
    print(f"vocabulary map: {summary['always']} pieces always, up to {summary['per_source']} "
          f"per source piece, from {summary['pairs']} training pairs of {data_dir}")
    return text, summary
