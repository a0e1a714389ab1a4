"""The own-corpus studies' work directory: synthetic corpora, and the data directories
``tf-nmt prepare-data`` makes of them, each reused by the next study when it is the same.

    WORK/synthetic-<pairs>/train.xx, train.yy, synthetic.json    (make_synthetic)
    WORK/data-<pairs>/corpus/manifest.json, vocab/, shards/        (tf-nmt prepare-data)
    WORK/data-<pairs>.prepared.json                                the prepare-data command and
                                                                   its measurement, written on success
    WORK/logs/                                                     every subprocess's output

None of it is committed (``runs/`` is ignored): it is rebuilt in minutes from the seed.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import make_synthetic
from experiments.own_corpus.measure import check_ok, run_measured

DEFAULT_WORK = Path("runs") / "own_corpus"
SRC_LANG, TGT_LANG = "xx", "yy"
LARGE, SMALL = 4_500_000, 450_000      # WMT14 en-de has 4.5M pairs (issue 55)
# The studies' --tiny runs without --set train this small model, so that the check takes seconds.
TINY_MODEL = ("model.num_layers=1", "model.d_model=64", "model.num_heads=2", "model.ff_dim=128")


def default_work(tiny: bool) -> Path:
    """The work dir: ``runs/own_corpus``, or for ``--tiny`` runs one under the temp dir (shared
    by the three studies' tiny runs, so that they prepare the tiny corpus once)."""
    return Path(tempfile.gettempdir()) / "tf-nmt-own-corpus-tiny" if tiny else DEFAULT_WORK


def default_out(tiny: bool, work: Path, module_file: str, name: str) -> Path:
    """A study's results file: ``experiments/own_corpus/results/NAME`` for real runs, the work
    dir for ``--tiny`` ones (they are checks of the code, not measurements)."""
    return Path(work) / name if tiny else common.results_path(module_file, name)


def synthetic_dir(work: Path, pairs: int) -> Path:
    return Path(work) / f"synthetic-{pairs}"


def data_dir(work: Path, pairs: int) -> Path:
    return Path(work) / f"data-{pairs}"


def stamp_path(work: Path, pairs: int) -> Path:
    return Path(work) / f"data-{pairs}.prepared.json"


def ensure_synthetic(work: Path, pairs: int, seed: int, compress: bool) -> Dict[str, Any]:
    """The synthetic corpus of ``pairs`` pairs in the work dir (generated unless there)."""
    record = make_synthetic.ensure(synthetic_dir(work, pairs), pairs, seed, compress,
                                   SRC_LANG, TGT_LANG)
    verb = "reused" if record.get("reused") else f"generated in {record['seconds']:.1f} s"
    print(f"synthetic corpus of {pairs:,} pairs {verb}: {synthetic_dir(work, pairs)}", flush=True)
    return record


def prepare_args(work: Path, pairs: int, vocab_size: int, compress: bool,
                 extra: Sequence[str] = (), spm_model: Optional[Path] = None,
                 target: Optional[Path] = None) -> List[str]:
    """The ``tf-nmt prepare-data`` arguments that prepare the synthetic corpus of ``pairs``
    into ``target`` (default :func:`data_dir`): a vocabulary of ``vocab_size`` pieces, or the
    given SentencePiece model (``spm_model``)."""
    src, tgt = make_synthetic.corpus_files(synthetic_dir(work, pairs), SRC_LANG, TGT_LANG, compress)
    vocab = (["--spm-model", str(spm_model)] if spm_model is not None
             else ["--vocab-size", str(vocab_size)])
    return ["prepare-data", "--data-dir", str(target or data_dir(work, pairs)),
            "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG, "--train-src", str(src),
            "--train-tgt", str(tgt), *vocab, *extra]


def remove_prepared(target: Path) -> None:
    """Remove a data dir and prepare-data's partial build beside it (``DATA_DIR.partial``),
    so that the next prepare-data starts from nothing rather than resuming."""
    for path in (Path(target), Path(target).parent / f"{Path(target).name}.partial"):
        if path.exists():
            shutil.rmtree(path)


def read_manifest(data: Path) -> Dict[str, Any]:
    return json.loads((Path(data) / "corpus" / "manifest.json").read_text())


def run_prepare(args: Sequence[str], log: Path, kill_after: Optional[float] = None,
                kill_when: Optional[str] = None, timeout: float = 3 * 3600) -> Dict[str, Any]:
    """One ``tf-nmt prepare-data`` subprocess, measured (:func:`run_measured`); fails unless it
    succeeded or was killed as asked."""
    cmd = [*common.tf_nmt_command(), *args]
    print("$ " + " ".join(cmd), flush=True)
    result = run_measured(cmd, log, timeout=timeout, kill_after=kill_after, kill_when=kill_when)
    if not result["killed"]:
        check_ok(result, cmd, log)
    return result


def ensure_prepared(work: Path, pairs: int, vocab_size: int, seed: int, compress: bool,
                    extra: Sequence[str] = (), spm_model: Optional[Path] = None
                    ) -> Dict[str, Any]:
    """:func:`data_dir` of ``pairs`` prepared with these settings: reused when its stamp records
    the same command (and its manifest is there), otherwise the synthetic corpus is made and
    prepared afresh (a data dir left by another command or a killed run is removed first).
    Returns the stamp: ``args``, ``synthetic`` record, ``measured`` run, ``reused``."""
    ensure_synthetic(work, pairs, seed, compress)
    args = prepare_args(work, pairs, vocab_size, compress, extra, spm_model)
    stamp, target = stamp_path(work, pairs), data_dir(work, pairs)
    if stamp.is_file() and (target / "corpus" / "manifest.json").is_file():
        record = json.loads(stamp.read_text())
        if record.get("args") == args:
            print(f"prepared data reused: {target}", flush=True)
            return {**record, "reused": True}
    stamp.unlink(missing_ok=True)
    remove_prepared(target)
    synthetic = json.loads((synthetic_dir(work, pairs) / "synthetic.json").read_text())
    measured = run_prepare(args, Path(work) / "logs" / f"prepare-{pairs}.log")
    record = {"args": args, "synthetic": synthetic, "measured": measured}
    stamp.write_text(json.dumps(record, indent=2) + "\n")
    return {**record, "reused": False}


def vocab_model(data: Path) -> Path:
    """The SentencePiece model a prepared data dir uses (its manifest's ``vocab.path``)."""
    return Path(data) / read_manifest(data)["vocab"]["path"]


def apply_tiny(args: Any, parser: Any, tiny: Dict[str, Any], model: bool = False) -> None:
    """``--tiny``: the study's small settings for every option left at its default (and the tiny
    model unless ``--set`` gave one, when ``model``)."""
    if not args.tiny:
        return
    for key, value in tiny.items():
        if getattr(args, key) == parser.get_default(key):
            setattr(args, key, value)
    if model:
        args.set = args.set or list(TINY_MODEL)


def run_study(args: Any, module_file: str, name: str, measure: Any, format_table: Any) -> int:
    """Measure, print the table and write the results file ``name`` (refused when it exists
    unless ``--overwrite``), for each own-corpus study's ``main``."""
    args.work_dir = args.work_dir or str(default_work(args.tiny))
    out = Path(args.out or default_out(args.tiny, Path(args.work_dir), module_file, name))
    common.refuse_existing([out], args.overwrite)
    result = measure(args)
    print("\n" + format_table(result))
    common.write_result(out, result, overwrite=args.overwrite)
    print(f"wrote {out}")
    return 0


def add_corpus_args(parser: Any) -> None:
    """The options of a study that measures one prepared corpus: --pairs, --data-dir, --seed,
    --vocab-size."""
    parser.add_argument("--pairs", type=int, default=LARGE,
                        help="the synthetic corpus prepared in the work dir (made when missing)")
    parser.add_argument("--data-dir", default=None,
                        help="measure this prepared own-corpus data dir instead of the work dir's")
    parser.add_argument("--seed", type=int, default=1, help="of the synthetic corpus")
    parser.add_argument("--vocab-size", type=int, default=32000,
                        help="when it has to be prepared")


def add_study_args(parser: Any, work_holds: str, tiny_help: str, out_name: str) -> None:
    """The options every own-corpus study shares: --work-dir, --tiny, --out, --overwrite."""
    parser.add_argument("--work-dir", default=None,
                        help=f"{work_holds} (default {DEFAULT_WORK}; --tiny: {default_work(True)})")
    parser.add_argument("--tiny", action="store_true", help=tiny_help)
    parser.add_argument("--out", default=None,
                        help=f"results file (default experiments/own_corpus/results/{out_name})")
    parser.add_argument("--overwrite", action="store_true")
