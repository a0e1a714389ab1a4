"""Serving engines (issue 46 item 5): one trained run served by its SavedModel, by CTranslate2
in float32 and by CTranslate2 in int8, timed alternately in one invocation, with BLEU and peak
memory of each.

From one checkpoint of the run (``--checkpoint``, default the run's latest; ``--weights``, default
the checkpoint's EMA where it holds one, else ``raw``, as ``tf-nmt export``) the study exports,
with the ``tf-nmt export`` command itself (run in-process, into a temporary directory):

* ``savedmodel``: one SavedModel per beam (a SavedModel's beam is fixed at export), with the
  export's default in-graph chunks (``--chunk-size``, :data:`tf_nmt.inference.formats.SERVING_CHUNK_SIZE`);
  TensorFlow's default threading;
* ``ct2-float32`` and ``ct2-int8``: ``tf-nmt export --format ctranslate2 --quantization Q``, one
  directory each (``--vmap``/``--no-vmap`` passed on to the export when given), served by
  :class:`tf_nmt.inference.ctranslate2.CTranslate2Translator` with its defaults unless
  ``--ct2-threads``, ``--ct2-inter-threads``, ``--ct2-mkl``, ``--ct2-isa`` or ``--vmap`` say
  otherwise (``engine_info`` records the settings used and where each came from); each request
  is length-sorted and decoded as one batch
  (:func:`~tf_nmt.inference.ctranslate2.translate_sorted`, the path of ``tf-nmt translate``), with
  the exported length penalty at beam > 1 (CTranslate2's ``length ** alpha``, not tf-nmt's GNMT
  penalty) and none at beam 1.

Requests are sent as a client would: the sentences of a length band of ``--split`` in file order
(bands as ``serving-speed``: short <= 10 source pieces, medium 11-25, long > 25, mixed: the first
sentences), ``--batch-sizes`` sentences per call. Every round times each (band, beam, request
size) for the three engines back to back, their order rotating from round to round; the table
has the median over rounds, sentences/s and target tokens/s (subword pieces of the outputs, by
the run's SentencePiece model) and each engine's ratio to the SavedModel in the same cell.

BLEU: each engine x beam translates the split (``--limit N``: its first N sentences), 64
sentences per request, scored with sacreBLEU and the tokenizer ``tf-nmt evaluate`` uses for the
target language; the difference to the SavedModel at the same beam and the share of identical
translations are recorded. Peak RSS: each engine (beam ``--rss-beam``) is loaded in a fresh
process that translates the mixed band at ``--rss-batch`` sentences per request
(:mod:`experiments.serving_speed.rss_worker`, ``ru_maxrss``). Targets (printed, not asserted):
CTranslate2 int8 >= 4x the SavedModel's sentences/s at beam 4, 32 per request, mixed band, BLEU
cost <= 0.5; float32 >= 2x, BLEU within 0.1.

    python -m experiments serving-engines --run-dir runs/quickstart   # results/serving_engines.json
    python -m experiments serving-engines --run-dir RUN --tiny --out /tmp/e.json   # a smoke test
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from experiments.lib import common
from experiments.serving_speed import rss_worker
from experiments.serving_speed.study import BANDS, band_sentences, client

STUDY = "serving-engines"
ENGINES = ("savedmodel", "ct2-float32", "ct2-int8")
QUANTIZATION = {"ct2-float32": "float32", "ct2-int8": "int8"}
BASELINE = "savedmodel"
BEAMS = (1, 4)
BATCH_SIZES = (1, 16, 32, 64)
BLEU_BATCH = 64  # sentences per request when translating the BLEU set
#: The issue's targets: at (band, request size, beam) of TARGET_CELL, ``engine``'s sentences/s
#: at least ``min_speedup`` x the SavedModel's, and its BLEU at that beam at most
#: ``max_bleu_cost`` below the SavedModel's (``two_sided``: also at most that much above).
TARGET_CELL = {"band": "mixed", "batch": 32, "beam": 4}
TARGETS = ({"engine": "ct2-int8", "min_speedup": 4.0, "max_bleu_cost": 0.5, "two_sided": False},
           {"engine": "ct2-float32", "min_speedup": 2.0, "max_bleu_cost": 0.1, "two_sided": True})
TINY = {"per_band": 4, "batch_sizes": (1, 4), "rounds": 1, "limit": 8}
TINY_OUT = Path(tempfile.gettempdir()) / "tf-nmt-serving-engines-tiny.json"

Runner = Callable[[List[str], int], List[str]]


def usable_cores() -> int:
    """The cores this process may run on (:func:`tf_nmt.utils.machine.usable_cores`)."""
    from tf_nmt.utils.machine import usable_cores as cores

    return cores()


def rotated(names: Sequence[str], r: int) -> List[str]:
    """``names`` rotated by ``r`` (round ``r``'s order)."""
    k = r % len(names)
    return list(names[k:]) + list(names[:k])


def run_export(argv: List[str], log: Callable[[str], None]) -> None:
    """``tf-nmt ARGV`` in this process; SystemExit when it fails."""
    from tf_nmt.cli import main as tf_nmt_main

    log("$ tf-nmt " + " ".join(argv))
    status = tf_nmt_main(argv)
    if status != 0:
        raise SystemExit(f"tf-nmt {' '.join(argv)} failed (exit {status})")


def export_engines(run_dir: Path, checkpoint: Optional[str], weights: str, beams: Sequence[int],
                   root: Path, log: Callable[[str], None] = print,
                   vmap: Optional[bool] = None) -> Dict[str, Any]:
    """Export every engine from one resolved checkpoint with ``tf-nmt export``: SavedModels
    ``root/savedmodel-beamB``, CTranslate2 directories ``root/ct2-Q``. Returns their paths
    (``paths[(engine, beam)]``, the CTranslate2 ones shared by all beams), the commands, the
    checkpoint prefix and the run's decoding settings."""
    from tf_nmt.config import load_config
    from tf_nmt.export.saved_model import directory_bytes
    from tf_nmt.run_dir import RunDir, resolve_checkpoint

    run = RunDir(Path(run_dir))
    prefix = resolve_checkpoint(run, checkpoint)  # once: every engine gets the same weights
    cfg = load_config(run.config_path)
    common_args = ["--run-dir", str(run_dir), "--checkpoint", prefix, "--weights", weights]
    paths: Dict[Tuple[str, int], Path] = {}
    commands: List[str] = []
    sizes: Dict[str, int] = {}
    for beam in beams:
        path = root / f"savedmodel-beam{beam}"
        argv = ["export", *common_args, "--export-dir", str(path), "--beam-size", str(beam)]
        run_export(argv, log)
        commands.append("tf-nmt " + " ".join(argv))
        paths[(BASELINE, beam)] = path
        sizes[f"savedmodel-beam{beam}"] = directory_bytes(path)
    for engine, quantization in QUANTIZATION.items():
        path = root / engine
        argv = ["export", "--format", "ctranslate2", "--quantization", quantization, *common_args,
                "--export-dir", str(path)]
        if vmap is not None:
            argv.append("--vmap" if vmap else "--no-vmap")
        run_export(argv, log)
        commands.append("tf-nmt " + " ".join(argv))
        for beam in beams:
            paths[(engine, beam)] = path
        sizes[engine] = directory_bytes(path)
    return {"paths": paths, "commands": commands, "checkpoint": prefix, "export_bytes": sizes,
            "length_penalty": cfg.decode.length_penalty, "run_beam_size": cfg.decode.beam_size,
            "model_kind": cfg.model.kind, "data_dir": cfg.data.data_dir}


def ct2_client(engine, beam: int) -> Runner:
    """Requests of ``batch`` sentences in the given order to a CTranslate2 translator, each
    length-sorted and decoded as one batch."""
    from tf_nmt.inference.ctranslate2 import translate_sorted

    def send(texts: List[str], batch: int) -> List[str]:
        out: List[str] = []
        for start in range(0, len(texts), batch):
            request = texts[start:start + batch]
            out += list(translate_sorted(engine, request, beam, batch_size=len(request)))
        return out

    return send


def load_runners(exports: Dict[str, Any], beams: Sequence[int], ct2: Dict[str, Any],
                 log: Callable[[str], None] = print
                 ) -> Tuple[Dict[Tuple[str, int], Runner], Dict[str, Any]]:
    """Callables ``(texts, batch) -> translations`` for every (engine, beam), and the engines'
    settings as loaded (CTranslate2: :attr:`CTranslate2Translator.settings`). ``ct2``: the
    translators' keyword arguments (threads, backend, vocabulary map; unset: the defaults)."""
    from tf_nmt.compat import tf
    from tf_nmt.inference.formats import SERVING_CHUNK_SIZE
    from tf_nmt.inference.ctranslate2 import CTranslate2Translator

    paths = exports["paths"]
    runners: Dict[Tuple[str, int], Runner] = {}
    for beam in beams:
        loaded = tf.saved_model.load(str(paths[(BASELINE, beam)]))
        runners[(BASELINE, beam)] = client(loaded.signatures["serving_default"])
    info: Dict[str, Any] = {BASELINE: {
        "threads": {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                    "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
                    "note": "TensorFlow's defaults (0: chosen by TensorFlow from the cores)"},
        "chunk_size": SERVING_CHUNK_SIZE,  # tf-nmt export's default --chunk-size
        "tensorflow_version": tf.__version__}}
    for engine in QUANTIZATION:
        translator = CTranslate2Translator(paths[(engine, beams[0])], **ct2)
        info[engine] = {**translator.settings, "asked": dict(ct2)}
        log(translator.describe())
        for beam in beams:
            runners[(engine, beam)] = ct2_client(translator, beam)
    return runners, info


def time_engines(runners: Dict[Tuple[str, int], Runner], texts: Dict[str, List[str]],
                 beams: Sequence[int], batch_sizes: Sequence[int], rounds: int,
                 log: Callable[[str], None] = print
                 ) -> Tuple[Dict[tuple, List[float]], Dict[tuple, List[str]]]:
    """Seconds per round and the translations of every (engine, beam, band, request size); each
    round runs the engines back to back per cell, in the round's rotated order."""
    bands = list(texts)
    warm = texts["mixed" if "mixed" in texts else bands[0]]
    for key, runner in runners.items():  # loaded, traced and warmed once, untimed
        runner(warm[:max(batch_sizes)], max(batch_sizes))
        runner(warm[:1], 1)
    seconds: Dict[tuple, List[float]] = {}
    outputs: Dict[tuple, List[str]] = {}
    for r in range(rounds):
        order = rotated(ENGINES, r)
        for band in bands:
            for beam in beams:
                for batch in batch_sizes:
                    for engine in order:
                        key = (engine, beam, band, batch)
                        start = time.perf_counter()
                        out = runners[(engine, beam)](texts[band], batch)
                        seconds.setdefault(key, []).append(time.perf_counter() - start)
                        outputs[key] = out
        log(f"round {r + 1}/{rounds} done (order {', '.join(order)})")
    return seconds, outputs


def speed_rows(seconds: Dict[tuple, List[float]], outputs: Dict[tuple, List[str]],
               texts: Dict[str, List[str]], count_tokens: Callable[[List[str]], List[int]]
               ) -> List[Dict[str, Any]]:
    """One row per (engine, beam, band, request size): medians, rates, ratios to the SavedModel."""
    rows = []
    source_tokens = {band: sum(count_tokens(t)) / len(t) for band, t in texts.items()}
    for (engine, beam, band, batch), times in seconds.items():
        out = outputs[(engine, beam, band, batch)]
        median = statistics.median(times)
        tokens = sum(count_tokens(out))
        rows.append({"engine": engine, "beam": beam, "band": band, "batch": batch,
                     "sentences": len(out), "mean_source_tokens": source_tokens[band],
                     "target_tokens": tokens, "seconds": times, "median_seconds": median,
                     "sentences_per_s": len(out) / median, "target_tokens_per_s": tokens / median})
    cell = {(r["engine"], r["beam"], r["band"], r["batch"]): r for r in rows}
    for row in rows:
        base = cell[(BASELINE, row["beam"], row["band"], row["batch"])]
        row["x_savedmodel_sentences_per_s"] = row["sentences_per_s"] / base["sentences_per_s"]
        row["x_savedmodel_target_tokens_per_s"] = (row["target_tokens_per_s"]
                                                   / max(base["target_tokens_per_s"], 1e-12))
        mine = outputs[(row["engine"], row["beam"], row["band"], row["batch"])]
        theirs = outputs[(BASELINE, row["beam"], row["band"], row["batch"])]
        row["identical_to_savedmodel"] = sum(a == b for a, b in zip(mine, theirs)) / len(mine)
    return rows


def bleu_scores(runners: Dict[Tuple[str, int], Runner], beams: Sequence[int],
                sources: List[str], references: List[str], tokenize: str
                ) -> List[Dict[str, Any]]:
    """BLEU of every engine x beam on ``sources``, its difference to the SavedModel at the same
    beam, the share of identical translations and up to 5 that differ."""
    from tf_nmt.evaluation.bleu import corpus_bleu

    hyps, rows = {}, []
    for beam in beams:
        for engine in ENGINES:
            start = time.perf_counter()
            hyps[(engine, beam)] = runners[(engine, beam)](sources, BLEU_BATCH)
            score = corpus_bleu(hyps[(engine, beam)], references, tokenize)
            rows.append({"engine": engine, "beam": beam, "sentences": len(sources),
                         "bleu": score.score, "bleu_text": score.text, "signature": score.signature,
                         "translate_seconds": time.perf_counter() - start})
    base = {r["beam"]: r for r in rows if r["engine"] == BASELINE}
    for row in rows:
        mine, theirs = hyps[(row["engine"], row["beam"])], hyps[(BASELINE, row["beam"])]
        row["bleu_minus_savedmodel"] = row["bleu"] - base[row["beam"]]["bleu"]
        row["identical_to_savedmodel"] = sum(a == b for a, b in zip(mine, theirs)) / len(mine)
        row["differences"] = [{"source": s, "savedmodel": b, "translation": a}
                              for s, a, b in zip(sources, mine, theirs) if a != b][:5]
    return rows


def peak_rss(exports: Dict[str, Any], texts: List[str], batch: int, beam: int,
             ct2: Dict[str, Any], work: Path, log: Callable[[str], None] = print,
             timeout: float = 3600) -> Dict[str, Any]:
    """Peak RSS of each engine in a fresh process (:mod:`experiments.serving_speed.rss_worker`)."""
    out: Dict[str, Any] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(common.ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    for engine in ENGINES:
        spec = {"engine": "savedmodel" if engine == BASELINE else "ctranslate2",
                "export_dir": str(exports["paths"][(engine, beam)]), "texts": texts,
                "batch": batch, "beam": beam, "ct2": ct2}
        spec_file = work / f"rss-{engine}.json"
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        proc = subprocess.run([*rss_worker.LAUNCH, str(spec_file)], capture_output=True,
                              text=True, env=env, cwd=str(common.ROOT), timeout=timeout,
                              check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the peak-RSS process of {engine} failed:\n{proc.stderr[-2000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["maxrss_mib"] = result["maxrss_kib"] / 1024
        out[engine] = result
        log(f"peak RSS {engine}: {result['maxrss_mib']:.0f} MiB")
    return {"band": "mixed", "batch": batch, "beam": beam, "sentences": len(texts),
            "engines": out}


def check_targets(rows: List[Dict[str, Any]], bleu: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each target of :data:`TARGETS` with its measured speed-up and BLEU difference and
    ``passed`` (None where the cell was not measured)."""
    cell = {(r["engine"], r["beam"], r["band"], r["batch"]): r for r in rows}
    scores = {(b["engine"], b["beam"]): b for b in bleu}
    where = (TARGET_CELL["beam"], TARGET_CELL["band"], TARGET_CELL["batch"])
    results = []
    for target in TARGETS:
        row, score = cell.get((target["engine"], *where)), scores.get((target["engine"],
                                                                       TARGET_CELL["beam"]))
        speedup = row["x_savedmodel_sentences_per_s"] if row else None
        diff = score["bleu_minus_savedmodel"] if score else None
        speed_ok = None if speedup is None else speedup >= target["min_speedup"]
        bleu_ok = None if diff is None else (
            -target["max_bleu_cost"] <= diff <= (target["max_bleu_cost"] if target["two_sided"]
                                                 else float("inf")))
        passed = None if speed_ok is None or bleu_ok is None else speed_ok and bleu_ok
        results.append({**target, **TARGET_CELL, "speedup": speedup, "bleu_minus_savedmodel": diff,
                         "speed_passed": speed_ok, "bleu_passed": bleu_ok, "passed": passed})
    return results


def measure(run_dir: Path, data_dir: Optional[Path], split: str, per_band: int,
            batch_sizes: Sequence[int], bands: Sequence[str], beams: Sequence[int], rounds: int,
            limit: int, checkpoint: Optional[str] = None, weights: str = "raw",
            ct2: Optional[Dict[str, Any]] = None, vmap: Optional[bool] = None,
            rss_batch: int = 32, rss_beam: int = 4, skip_empty_bands: bool = False,
            log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Export, time, score and weigh every engine; see the module docstring. ``ct2``: keyword
    arguments of every :class:`CTranslate2Translator` (threads, backend, ``use_vmap``);
    ``vmap``: export with ``--vmap``/``--no-vmap`` (None: the export's default)."""
    from tf_nmt.data.prepared import read_prepared
    from tf_nmt.data.tokenizer import SubwordTokenizer
    from tf_nmt.data.data_dir import load_split
    from tf_nmt.evaluation.bleu import tokenizer_for
    from tf_nmt.run_dir import RunDir, check_data_matches

    ct2 = dict(ct2 or {})
    if "use_mkl" in ct2 or "cpu_isa" in ct2:  # before the exports import ctranslate2
        from tf_nmt.inference.ct2_backend import import_ctranslate2

        import_ctranslate2(ct2.get("use_mkl"), ct2.get("cpu_isa"))
    with tempfile.TemporaryDirectory(prefix="tfnmt-engines-") as tmp:
        exports = export_engines(Path(run_dir), checkpoint, weights, beams, Path(tmp), log, vmap)
        tokenizer = SubwordTokenizer.load(RunDir(Path(run_dir)).vocab_path)
        prepared = read_prepared(Path(data_dir or exports["data_dir"]))
        check_data_matches(prepared, RunDir(Path(run_dir)), tokenizer,  # as evaluate does
                           "score it on the data dir it was trained on")
        pairs = load_split(prepared.root, split)
        sources = [s for s, _ in pairs]
        lengths = [len(ids) for ids in tokenizer.encode(sources)]
        texts, skipped = {}, []
        for band in bands:
            chosen = band_sentences(sources, lengths, band, per_band)
            if chosen:
                texts[band] = chosen
            elif skip_empty_bands:
                skipped.append(band)
                log(f"no {band!r} sentences in the {split} split: band left out")
            else:
                raise ValueError(f"no {band!r} sentences in the {split} split")
        if not texts:
            raise ValueError(f"none of the bands {', '.join(bands)} has sentences in {split}")
        runners, engine_info = load_runners(exports, beams, ct2, log)
        load_before = os.getloadavg()
        seconds, outputs = time_engines(runners, texts, beams, batch_sizes, rounds, log)
        load_after = os.getloadavg()
        rows = speed_rows(seconds, outputs, texts,
                          lambda out: [len(ids) for ids in tokenizer.encode(out)])
        bleu_pairs = pairs[:limit] if limit else pairs
        tokenize, fallback = tokenizer_for(prepared.tgt_lang)
        if fallback:
            log(fallback)
        log(f"BLEU on {len(bleu_pairs)} {split} sentences ({tokenize} tokenizer)")
        bleu = bleu_scores(runners, beams, [s for s, _ in bleu_pairs],
                           [t for _, t in bleu_pairs], tokenize)
        rss_texts = band_sentences(sources, lengths, "mixed", per_band)
        rss = (peak_rss(exports, rss_texts, rss_batch, rss_beam, ct2, Path(tmp), log)
               if rss_beam in beams else None)
    alpha = exports["length_penalty"]
    return {"run_dir": str(run_dir), "checkpoint": exports["checkpoint"], "weights": weights,
            "model_kind": exports["model_kind"], "data_dir": str(prepared.root), "split": split,
            "languages": list(prepared.languages), "export_commands": exports["commands"],
            "export_bytes": exports["export_bytes"], "engines": list(ENGINES),
            "engine_info": engine_info, "export_vmap": vmap, "baseline": BASELINE,
            "beams": list(beams),
            "length_penalty": {
                "savedmodel": f"GNMT ((5 + length) / 6) ** {alpha} (tf-nmt's beam search)",
                "ctranslate2": f"length ** {alpha} at beam > 1, none at beam 1 (tf-nmt "
                               "translate's CTranslate2 path)"},
            "bands": list(texts), "skipped_bands": skipped, "per_band": per_band,
            "batch_sizes": list(batch_sizes), "rounds": rounds, "rows": rows,
            "bleu": bleu, "bleu_tokenize": tokenize, "bleu_tokenize_fallback": fallback,
            "bleu_sentences": len(bleu_pairs), "bleu_batch": BLEU_BATCH, "peak_rss": rss,
            "targets": check_targets(rows, bleu), "cpu_count": os.cpu_count(),
            "usable_cores": usable_cores(), "machine": platform.machine(),
            "ld_preload": os.environ.get("LD_PRELOAD"),
            "load_average_before": load_before, "load_average_after": load_after}


def table(report: Dict[str, Any]) -> str:
    """Sentences/s and target tokens/s per (beam, band, request size), one column per engine
    (x the SavedModel in brackets); then BLEU, peak RSS and the targets."""
    cell = {(r["engine"], r["beam"], r["band"], r["batch"]): r for r in report["rows"]}
    lines: List[str] = []
    for beam in report["beams"]:
        head = f"{'band':<8}{'batch':>6}" + "".join(f"{e:>30}" for e in ENGINES)
        lines += ["", f"beam {beam}: sentences/s, target tokens/s (x savedmodel sentences/s)",
                  head, "-" * len(head)]
        for band in report["bands"]:
            for batch in report["batch_sizes"]:
                parts = []
                for engine in ENGINES:
                    r = cell[(engine, beam, band, batch)]
                    parts.append(f"{r['sentences_per_s']:8.1f} {r['target_tokens_per_s']:9.1f} "
                                 f"({r['x_savedmodel_sentences_per_s']:5.2f})")
                lines.append(f"{band:<8}{batch:>6}" + "".join(f"{p:>30}" for p in parts))
    lines += ["", f"BLEU on {report['bleu_sentences']} {report['split']} sentences "
              f"({report['bleu_tokenize']}); minus savedmodel; identical translations"]
    for b in report["bleu"]:
        lines.append(f"  {b['engine']:<12} beam {b['beam']}: {b['bleu']:6.2f} "
                     f"({b['bleu_minus_savedmodel']:+.2f}); {b['identical_to_savedmodel']:.1%}")
    if report["peak_rss"]:
        rss = report["peak_rss"]
        lines.append(f"peak RSS (fresh process: load + mixed band, {rss['batch']} per request, "
                     f"beam {rss['beam']})")
        for engine, r in rss["engines"].items():
            lines.append(f"  {engine:<12} {r['maxrss_mib']:8.0f} MiB")
    lines.append(f"targets (beam {TARGET_CELL['beam']}, {TARGET_CELL['batch']} per request, "
                 f"{TARGET_CELL['band']} band; not asserted)")
    for t in report["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "not measured"}[t["passed"]]
        speed = "n/a" if t["speedup"] is None else f"{t['speedup']:.2f}x"
        diff = "n/a" if t["bleu_minus_savedmodel"] is None else f"{t['bleu_minus_savedmodel']:+.2f}"
        bound = (f"within {t['max_bleu_cost']}" if t["two_sided"]
                 else f"cost <= {t['max_bleu_cost']}")
        lines.append(f"  {t['engine']:<12} >= {t['min_speedup']:.0f}x: {speed}; BLEU {bound}: "
                     f"{diff} -> {verdict}")
    return "\n".join(lines).lstrip("\n")


def ct2_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The CTranslate2 translators' keyword arguments the flags ask for (unset ones left out,
    so the translator's defaults apply and are recorded as such)."""
    out: Dict[str, Any] = {}
    if args.ct2_threads:
        out["intra_threads"] = args.ct2_threads
    if args.ct2_inter_threads:
        out["inter_threads"] = args.ct2_inter_threads
    if args.ct2_mkl != "auto":
        out["use_mkl"] = args.ct2_mkl == "on"
    if args.ct2_isa != "auto":
        out["cpu_isa"] = args.ct2_isa
    if args.vmap is not None:
        out["use_vmap"] = args.vmap
    return out


def _int_list(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m experiments {STUDY}",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--checkpoint", help="checkpoint prefix or directory (default: the run's "
                   "latest), as tf-nmt export --checkpoint; resolved once for every engine")
    p.add_argument("--weights", choices=["raw", "ema"],
                   help="as tf-nmt export --weights (default: the checkpoint's EMA where it "
                        "holds one, else raw, the export's default)")
    p.add_argument("--data-dir", type=Path, help="prepared data (default: the run's data.data_dir)")
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.add_argument("--limit", type=int, default=0,
                   help="BLEU on the first N sentences of the split (0: all)")
    p.add_argument("--per-band", type=int, default=64, help="sentences per length band")
    p.add_argument("--bands", default=",".join(BANDS))
    p.add_argument("--beams", default=",".join(map(str, BEAMS)))
    p.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)),
                   help="sentences per request")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ct2-threads", type=int, default=0,
                   help="CTranslate2 intra_threads (default 0: the translator's default layout)")
    p.add_argument("--ct2-inter-threads", type=int, default=0,
                   help="CTranslate2 translators, each batch dealt across them (default 0: the "
                        "translator's default layout)")
    p.add_argument("--ct2-mkl", choices=["auto", "on", "off"], default="auto",
                   help="CT2_USE_MKL for the CTranslate2 engines (auto: the translator's choice)")
    p.add_argument("--ct2-isa", choices=["auto", "GENERIC", "AVX", "AVX2", "AVX512"],
                   default="auto", help="CT2_FORCE_CPU_ISA (auto: the translator's choice)")
    p.add_argument("--vmap", action=argparse.BooleanOptionalAction, default=None,
                   help="export the CTranslate2 engines with (--vmap) or without (--no-vmap) a "
                        "vocabulary map and translate accordingly (default: the export's default)")
    p.add_argument("--rss-batch", type=int, default=32,
                   help="sentences per request in the peak-RSS processes")
    p.add_argument("--rss-beam", type=int, default=4, help="beam of the peak-RSS processes")
    p.add_argument("--tiny", action="store_true",
                   help=f"a smoke test: {TINY['per_band']} sentences per band, requests of "
                   f"{','.join(map(str, TINY['batch_sizes']))}, {TINY['rounds']} round, BLEU on "
                   f"{TINY['limit']} sentences, empty bands left out, written to {TINY_OUT} "
                   "unless --out")
    p.add_argument("--out", type=Path)
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    if args.tiny:
        args.per_band, args.rounds, args.limit = TINY["per_band"], TINY["rounds"], TINY["limit"]
        args.batch_sizes = ",".join(map(str, TINY["batch_sizes"]))
        if args.out is None:  # scratch: never the results file, replaced freely
            args.out, args.overwrite = TINY_OUT, True
    out = args.out or common.results_path(__file__, "serving_engines.json")
    bands = [b for b in args.bands.split(",") if b]
    beams, batch_sizes = _int_list(args.beams), _int_list(args.batch_sizes)
    unknown = sorted(set(bands) - set(BANDS))
    if unknown or not bands:
        p.error(f"--bands must name some of {', '.join(BANDS)} (got {unknown or bands})")
    if not beams or min(beams) < 1 or not batch_sizes or min(batch_sizes) < 1:
        p.error("--beams and --batch-sizes must be >= 1")
    if (args.per_band < 1 or args.rounds < 1 or args.limit < 0 or args.ct2_threads < 0
            or args.ct2_inter_threads < 0):
        p.error("--per-band and --rounds must be >= 1, --limit and --ct2-*threads >= 0")
    if out.exists() and not args.overwrite:
        p.error(f"{out} exists; pass --overwrite to replace it")

    from tf_nmt.run_dir import choose_weights

    checkpoint, weights = choose_weights(args.run_dir, args.checkpoint, args.weights)
    report = measure(args.run_dir, args.data_dir, args.split, args.per_band, batch_sizes, bands,
                     beams, args.rounds, args.limit, checkpoint=checkpoint,
                     weights=weights, ct2=ct2_options(args), vmap=args.vmap,
                     rss_batch=args.rss_batch, rss_beam=args.rss_beam, skip_empty_bands=args.tiny)
    report["tiny"] = args.tiny
    report["command"] = common.command_line(STUDY, argv)
    common.write_result(out, report, overwrite=True)
    print(table(report))
    print(f"wrote {out}")
    return 0
