"""Evaluate a run on a corpus split: beam-search translate, detokenise, score with sacreBLEU."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from tf_nmt.data.prepared import read_prepared
from tf_nmt.data.data_dir import load_split
from tf_nmt.evaluation.bleu import copy_baseline, corpus_bleu, corpus_chrf, tokenizer_for
from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
from tf_nmt.models.activation_quant import inference_engine, use_engine
from tf_nmt.run_dir import RunDir, check_data_matches, load_run
from tf_nmt.utils.io import write_bytes_atomic


def evaluate_run(run_dir: Path, split: str = "test", checkpoint: Optional[str] = None,
                 data_dir: Optional[Path] = None, beam_size: Optional[int] = None,
                 length_penalty: Optional[float] = None, limit: int = 0,
                 log: Callable[[str], None] = print, engine: str = "emulated",
                 weights: Optional[str] = None) -> Dict[str, Any]:
    """BLEU of the run's model on ``split`` of ``data_dir`` (default: the run's), which must
    hold the run's languages and vocabulary (hypotheses written to ``run_dir/<split>.hyp.<tgt>``;
    BLEU tokenised for the target language, :func:`tf_nmt.evaluation.bleu.tokenizer_for`);
    ``engine`` runs its quantised matmuls (:data:`tf_nmt.models.activation_quant.ENGINES`, e.g.
    ``"lowprec"``: the log-space kernels); ``weights``: ``"raw"``, ``"ema"`` (the run's
    moving average, ``train.ema_decay``) or None (:func:`tf_nmt.run_dir.choose_weights`: the
    EMA where the checkpoint holds one), recorded in the report with the checkpoint."""
    loaded = load_run(run_dir, checkpoint, weights)
    model, tokenizer, cfg, weights = loaded.model, loaded.tokenizer, loaded.cfg, loaded.weights
    matmuls = inference_engine(model, engine)
    prepared = read_prepared(Path(data_dir or cfg.data.data_dir))
    check_data_matches(prepared, RunDir(Path(run_dir)), tokenizer,
                       "evaluate it on the data dir it was trained on (--data-dir)")
    pairs = load_split(prepared.root, split)
    if limit:
        pairs = pairs[:limit]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    beam = beam_size or cfg.decode.beam_size
    alpha = cfg.decode.length_penalty if length_penalty is None else length_penalty
    translate_fn = make_translate_fn(model, tokenizer, beam, alpha)
    start = time.perf_counter()
    with use_engine(matmuls):
        hypotheses = translate_texts(translate_fn, tokenizer, sources, cfg.decode.batch_size)
    seconds = time.perf_counter() - start
    write_bytes_atomic(Path(run_dir) / f"{split}.hyp.{prepared.tgt_lang}",
                       ("\n".join(hypotheses) + "\n").encode())
    tokenize, fallback = tokenizer_for(prepared.tgt_lang)
    if fallback:
        log(fallback)
    bleu = corpus_bleu(hypotheses, references, tokenize)
    chrf = corpus_chrf(hypotheses, references)
    baseline = copy_baseline(sources, references, tokenize)
    quantised = getattr(model, "activation_quantization", None) is not None  # else no engine runs
    log(f"{split}: {len(pairs)} sentences translated in {seconds:.1f} s (beam {beam}, alpha {alpha}, "
        + (f"matmuls: {matmuls.name}, " if quantised else "") + f"{weights} weights)")
    log(f"BLEU = {bleu.score:.2f}  [{bleu.text}]")
    log(f"chrF = {chrf.score:.2f}")
    log(f"copy-the-source baseline BLEU = {baseline.score:.2f}")
    log(f"sacreBLEU signature: {bleu.signature}")
    return {"split": split, "sentences": len(pairs), "bleu": bleu.score, "bleu_text": bleu.text,
            "signature": bleu.signature, "chrf": chrf.score, "copy_baseline_bleu": baseline.score,
            "beam_size": beam, "length_penalty": alpha, "translate_seconds": seconds,
            "matmul_engine": matmuls.name, "weights": weights, "checkpoint": loaded.checkpoint,
            "languages": list(prepared.languages), "bleu_tokenize": tokenize,
            "bleu_tokenize_fallback": fallback,
            "examples": [{"source": s, "reference": r, "hypothesis": h}
                         for s, r, h in list(zip(sources, references, hypotheses))[:5]]}
