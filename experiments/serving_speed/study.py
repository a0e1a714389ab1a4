"""Serving speed of the exported translator (issue 17 item 4): sentences/s and target tokens/s
against request size and sentence length, for the SavedModel and for in-process ``evaluate``.

From one trained run it exports SavedModels (into a temporary directory) that differ in one
setting each, loads them with ``tf.saved_model.load`` and sends them requests as a client would:
the sentences of a length band in their file order, ``--batch-sizes`` sentences per call.

* ``export``: the run's beam, each request decoded whole (``tf-nmt export --chunk-size 0``);
* ``export-chunkC``: the same with ``--chunk-size C`` (length-sorted chunks inside the graph);
* ``export-beam1``: greedy search, the beam's cost by difference;
* ``evaluate``: the in-process path of ``tf-nmt evaluate`` (host-side length-sorted batches).

Bands are taken from ``--split`` by source subword length: ``short`` (at most 10), ``medium``
(11-25), ``long`` (over 25), and ``mixed``: the first sentences in file order. Every round times
each (band, request size) for every variant, the variants' order rotating from round to round,
so that the machine's drift spreads over all of them; the table has the median over rounds.
Translations of each variant are compared with those of ``export`` (agreement in %).

    python -m experiments serving-speed --run-dir runs/quickstart        # experiments/serving_speed/results/serving_speed.json
    python -m experiments serving-speed --run-dir RUN --per-band 16 --batch-sizes 1,8 --rounds 1 --out /tmp/s.json
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from experiments.lib import common

BANDS = {"short": (1, 10), "medium": (11, 25), "long": (26, 10 ** 6), "mixed": None}


def band_sentences(sources: Sequence[str], lengths: Sequence[int], band: str,
                   limit: int) -> List[str]:
    """The first ``limit`` sentences of ``band`` in file order (``mixed``: any length)."""
    bounds = BANDS[band]
    chosen = [s for s, n in zip(sources, lengths)
              if bounds is None or bounds[0] <= n <= bounds[1]]
    return chosen[:limit]


def variant_names(chunk_sizes: Sequence[int], greedy: bool) -> List[str]:
    """The timed variants: the plain export, one per chunk size, greedy, in-process evaluate."""
    return (["export"] + [f"export-chunk{c}" for c in chunk_sizes]
            + (["export-beam1"] if greedy else []) + ["evaluate"])


def client(signature) -> Callable[[List[str], int], List[str]]:
    """Requests of ``batch`` sentences in the given order to a loaded serving signature."""
    from tf_nmt.compat import tf

    def send(texts: List[str], batch: int) -> List[str]:
        out: List[str] = []
        for start in range(0, len(texts), batch):
            reply = signature(texts=tf.constant(texts[start:start + batch]))["translations"]
            out += [t.decode("utf-8") for t in reply.numpy()]
        return out

    return send


def build_variants(run_dir: Path, names: Sequence[str], export_root: Path,
                   log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Callables ``(texts, batch) -> translations`` for every variant name, plus the run's
    tokenizer and decode settings."""
    from tf_nmt.compat import tf
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
    from tf_nmt.export.saved_model import export_saved_model
    from tf_nmt.run_dir import load_trained_model

    model, tokenizer, cfg = load_trained_model(run_dir)
    beam, alpha = cfg.decode.beam_size, cfg.decode.length_penalty
    runners: Dict[str, Callable[[List[str], int], List[str]]] = {}
    for name in names:
        if name == "evaluate":
            fn = make_translate_fn(model, tokenizer, beam, alpha)
            runners[name] = lambda texts, batch, fn=fn: translate_texts(fn, tokenizer, texts, batch)
            continue
        chunk = int(name[len("export-chunk"):]) if name.startswith("export-chunk") else 0
        path = export_saved_model(model, tokenizer, export_root / name,
                                  beam_size=1 if name == "export-beam1" else beam,
                                  length_penalty=alpha, chunk_size=chunk)
        runners[name] = client(tf.saved_model.load(str(path)).signatures["serving_default"])
        log(f"exported {name} (beam {1 if name == 'export-beam1' else beam}, chunk {chunk})")
    return {"runners": runners, "tokenizer": tokenizer, "config": cfg, "beam": beam,
            "length_penalty": alpha}


def measure(run_dir: Path, data_dir: Optional[Path], split: str, per_band: int,
            batch_sizes: Sequence[int], chunk_sizes: Sequence[int], bands: Sequence[str],
            rounds: int, greedy: bool = True, log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Time every (variant, band, request size); see the module docstring."""
    from tf_nmt.data.data_dir import load_split

    names = variant_names(chunk_sizes, greedy)
    with tempfile.TemporaryDirectory(prefix="tfnmt-serving-") as tmp:
        built = build_variants(Path(run_dir), names, Path(tmp), log)
        runners, tokenizer = built["runners"], built["tokenizer"]
        pairs = load_split(Path(data_dir or built["config"].data.data_dir), split)
        sources = [s for s, _ in pairs]
        lengths = [len(ids) for ids in tokenizer.encode(sources)]
        texts = {b: band_sentences(sources, lengths, b, per_band) for b in bands}
        for band, chosen in texts.items():
            if not chosen:
                raise ValueError(f"no {band!r} sentences in the {split} split")
        warm = texts[bands[0]][:max(batch_sizes)]
        for name in names:  # traced and warmed once, untimed
            runners[name](warm, max(batch_sizes))
        seconds: Dict[tuple, List[float]] = {}
        outputs: Dict[tuple, List[str]] = {}
        load_before = os.getloadavg()
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for band in bands:
                for batch in batch_sizes:
                    for name in order:
                        start = time.perf_counter()
                        out = runners[name](texts[band], batch)
                        seconds.setdefault((name, band, batch), []).append(
                            time.perf_counter() - start)
                        outputs[(name, band, batch)] = out
            log(f"round {r + 1}/{rounds} done")
        load_after = os.getloadavg()
    rows = []
    for (name, band, batch), times in seconds.items():
        out = outputs[(name, band, batch)]
        reference = outputs[("export", band, batch)]
        median = statistics.median(times)
        tokens = sum(len(ids) for ids in tokenizer.encode(out))
        rows.append({"variant": name, "band": band, "batch": batch,
                     "sentences": len(texts[band]),
                     "mean_source_tokens": sum(len(ids) for ids in tokenizer.encode(texts[band]))
                     / len(texts[band]),
                     "seconds": times, "sentences_per_s": len(texts[band]) / median,
                     "target_tokens_per_s": tokens / median,
                     "agreement_with_export": sum(a == b for a, b in zip(out, reference)) / len(out)})
    return {"run_dir": str(run_dir), "split": split, "beam_size": built["beam"],
            "length_penalty": built["length_penalty"], "variants": names, "bands": list(bands),
            "batch_sizes": list(batch_sizes), "rounds": rounds, "rows": rows,
            "cpu_count": os.cpu_count(), "machine": platform.machine(),
            "load_average_before": load_before, "load_average_after": load_after}


def table(report: Dict[str, Any]) -> str:
    """Sentences/s per (band, request size), one column per variant, and each variant's ratio
    to the plain export."""
    names = report["variants"]
    cell = {(r["variant"], r["band"], r["batch"]): r for r in report["rows"]}
    head = f"{'band':<8}{'batch':>6}" + "".join(f"{n:>16}" for n in names)
    lines = [f"sentences/s (x plain export), beam {report['beam_size']}", head, "-" * len(head)]
    for band in report["bands"]:
        for batch in report["batch_sizes"]:
            base = cell[("export", band, batch)]["sentences_per_s"]
            parts = []
            for n in names:
                v = cell[(n, band, batch)]["sentences_per_s"]
                parts.append(f"{v:8.1f} ({v / base:4.2f})")
            lines.append(f"{band:<8}{batch:>6}" + "".join(f"{p:>16}" for p in parts))
    return "\n".join(lines)


def _int_list(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments serving-speed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--data-dir", type=Path, help="prepared data (default: the run's data.data_dir)")
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.add_argument("--per-band", type=int, default=64, help="sentences per length band")
    p.add_argument("--bands", default=",".join(BANDS))
    p.add_argument("--batch-sizes", default="1,16,64", help="sentences per request")
    p.add_argument("--chunk-sizes", default="16", help="export --chunk-size variants")
    p.add_argument("--no-greedy", action="store_true", help="leave out the beam-1 export")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=common.results_path(__file__, "serving_speed.json"))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    bands = [b for b in args.bands.split(",") if b]
    batch_sizes, chunk_sizes = _int_list(args.batch_sizes), _int_list(args.chunk_sizes)
    unknown = sorted(set(bands) - set(BANDS))
    if unknown or not bands:
        p.error(f"--bands must name some of {', '.join(BANDS)} (got {unknown or bands})")
    if not batch_sizes or min(batch_sizes) < 1 or (chunk_sizes and min(chunk_sizes) < 1):
        p.error("--batch-sizes must be >= 1 and --chunk-sizes >= 1")
    if args.per_band < 1 or args.rounds < 1:
        p.error("--per-band and --rounds must be >= 1")
    if args.out.exists() and not args.overwrite:
        p.error(f"{args.out} exists; pass --overwrite to replace it")

    report = measure(args.run_dir, args.data_dir, args.split, args.per_band, batch_sizes,
                     chunk_sizes, bands, args.rounds, greedy=not args.no_greedy)
    report["command"] = common.command_line("serving-speed", argv)
    common.write_result(args.out, report, overwrite=True)
    print(table(report))
    print(f"wrote {args.out}")
    return 0
