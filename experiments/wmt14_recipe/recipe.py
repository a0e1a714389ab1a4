"""The WMT14 English-German recipe of ``docs/own-data.md``, run end to end on the generated
WMT14-shaped corpus at reduced steps (issue 55).

The commands are read from the docs page itself (its section "Recipe: WMT14 English-German"),
so that what runs here is what a user copies; the few changes that this machine needs are one
declared table (:data:`SUBSTITUTIONS`), applied by :func:`adapt` and written into the results
next to each command as it ran:

- the downloads (``wget``/``tar``, ``sacrebleu --echo``) are replaced by the generated corpus
  (``experiments/own_corpus/make_synthetic.py``, 4.5M pairs, cut into the three training files
  the page names, in the proportions of their published sizes) and a generated dev and test set
  (another seed), written under the names the page uses;
- ``/shared/`` becomes the work directory, ``/opt/tf-nmt/.venv/bin/tf-nmt`` this environment's;
- ``horovodrun -np 64 --hostfile hosts.txt`` becomes ``horovodrun -np 2`` (this machine);
- ``train.train_steps`` and ``train.warmup_steps`` are reduced, and the run checkpoints and logs
  often enough to average 5 checkpoints (``train.steps_per_cycle``, ``train.log_every``);
- ``sacrebleu -t wmt14 -l en-de`` scores against the generated reference file instead.

Beyond the page, the run is killed (SIGKILL of the whole launch) a few log lines after its second
checkpoint and the same command is run again: the resumed run must log the same losses, bit for
bit, for the steps the killed one had logged past that checkpoint. ``evaluate`` also writes its
scores as JSON, and the averaged checkpoint is exported (``tf-nmt export``) and served
(``tf-nmt translate --export-dir``) on the first test lines, which must match the run's own
translation. Finally ``transformer-big`` and ``gnmt-1024`` train a few steps each under
``horovodrun -np 2`` over a prepared corpus whose shard count is odd.

    python -m experiments wmt14-recipe                 # ~1 hour on 2 cores; --resume after a stop
    python -m experiments wmt14-recipe --tiny          # a check of the code: minutes, temp dir

The corpus measures that the path works at WMT's shape; it says nothing about translation
quality on real text (see ``experiments/own_corpus/README.md``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import make_synthetic
from experiments.own_corpus.corpora import apply_tiny
from experiments.own_corpus.measure import check_ok, run_measured
from tf_nmt.errors import UserError
from tf_nmt.training.callbacks import PROGRESS_LOG, read_progress_log

DOC = common.ROOT / "docs" / "own-data.md"
SECTION = "## Recipe: WMT14 English-German"
# Published sizes (sentence pairs) of the WMT14 en-de training corpora, in the page's order:
# Europarl v7 1,920,209; Common Crawl 2,399,123; News Commentary v9 201,288 (the WMT14 task page).
PUBLISHED_PAIRS = (1_920_209, 2_399_123, 201_288)
BIG_PRESETS = ("transformer-big", "gnmt-1024")

#: Every change made to the page's commands, as recorded in the results.
SUBSTITUTIONS = {
    "downloads": "wget/tar and sacrebleu --echo are replaced by the generated corpus and "
                 "generated dev/test sets, written under the page's file names",
    "/shared/": "the work directory",
    "/opt/tf-nmt/.venv/bin/tf-nmt, tf-nmt, horovodrun, sacrebleu": "this environment's",
    "horovodrun -np 64 --hostfile hosts.txt": "horovodrun -np NP (this machine)",
    "train.train_steps, train.warmup_steps": "reduced (--steps, --warmup)",
    "added to train": "train.steps_per_cycle and train.log_every (checkpoints to average)",
    "added to evaluate": "--output-json (the scores as JSON)",
    "sacrebleu -t wmt14 -l en-de": "sacrebleu with the generated reference file",
}


@dataclass
class DocCommand:
    """One command of the recipe as the page writes it."""

    text: str                    # the logical line (continuations joined)
    argv: List[str]              # its words, comments and redirections removed
    stdin: Optional[str] = None  # ``< FILE``
    stdout: Optional[str] = None  # ``> FILE``

    @property
    def kind(self) -> str:
        """fetch, score, horovodrun, or ``tf-nmt SUBCOMMAND``."""
        head = self.argv[0]
        if head in ("wget", "for") or (head == "sacrebleu" and "--echo" in self.argv):
            return "fetch"
        if head == "sacrebleu":
            return "score"
        if head == "horovodrun":
            return "horovodrun"
        if head.endswith("tf-nmt"):
            return f"tf-nmt {self.argv[1]}"
        raise UserError(f"{DOC.name}: the recipe has a command this runner does not know: "
                        f"{self.text!r}")


def doc_commands(path: Path = DOC) -> List[DocCommand]:
    """The commands of the page's WMT14 recipe, in order."""
    text = Path(path).read_text(encoding="utf-8")
    if SECTION not in text:
        raise UserError(f"{path}: no section {SECTION!r}")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    commands: List[DocCommand] = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        logical = textwrap.dedent(block).replace("\\\n", " ")
        for line in logical.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            argv, stdin, stdout = [], None, None
            it = iter(words)
            for word in it:
                if word == "<":
                    stdin = next(it)
                elif word == ">":
                    stdout = next(it)
                else:
                    argv.append(word)
            commands.append(DocCommand(" ".join(line.split()), argv, stdin, stdout))
    return commands


def _option(argv: Sequence[str], name: str) -> List[str]:
    """The values after option ``name`` up to the next option (``--train-src A B C``)."""
    if name not in argv:
        return []
    values = []
    for word in argv[argv.index(name) + 1:]:
        if word.startswith("-"):
            break
        values.append(word)
    return values


def _set_value(argv: List[str], key: str, value: Any) -> None:
    """Replace ``--set key=OLD`` by ``--set key=value`` (an error if the page has no such key)."""
    for i, word in enumerate(argv):
        if word.startswith(f"{key}=") and i and argv[i - 1] == "--set":
            argv[i] = f"{key}={value}"
            return
    raise UserError(f"{DOC.name}: the recipe's train command has no --set {key}=...")


def _venv_tool(name: str) -> str:
    """This environment's ``name`` script (``horovodrun``, ``tf-nmt``, ``sacrebleu``)."""
    path = Path(sys.executable).parent / name
    return str(path) if path.is_file() else name


def adapt(cmd: DocCommand, work: Path, args: argparse.Namespace) -> List[str]:
    """The page's command as it runs here (:data:`SUBSTITUTIONS`); ``[]`` for a download."""
    if cmd.kind == "fetch":
        return []
    tf_nmt = _venv_tool("tf-nmt")
    argv = [str(work) + "/" + w[len("/shared/"):] if w.startswith("/shared/") else w
            for w in cmd.argv]
    argv = [tf_nmt if w in ("tf-nmt", "/opt/tf-nmt/.venv/bin/tf-nmt") else w for w in argv]
    if cmd.kind == "score":
        return [_venv_tool("sacrebleu"), args.test_ref, "-i", cmd.stdin,
                "-b"]
    if cmd.kind == "horovodrun":
        if "--hostfile" in argv:
            i = argv.index("--hostfile")
            del argv[i:i + 2]
        argv[argv.index("-np") + 1] = str(args.np)
        argv[0] = _venv_tool("horovodrun")
        _set_value(argv, "train.train_steps", args.steps)
        _set_value(argv, "train.warmup_steps", args.warmup)
        argv += common.set_args([f"train.steps_per_cycle={args.cycle}",
                                 f"train.log_every={args.log_every}", *args.set])
    if cmd.kind == "tf-nmt prepare-data" and args.tiny:
        argv[argv.index("--vocab-size") + 1] = str(args.vocab_size)
    if cmd.kind == "tf-nmt evaluate":
        argv += ["--output-json", str(work / "evaluate.json")]
    return argv


def _split_counts(total: int, shares: Sequence[int]) -> List[int]:
    counts = [total * s // sum(shares) for s in shares]
    counts[-1] += total - sum(counts)
    return counts


def _copy_lines(src, dst: Path, count: int) -> int:
    dst.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(dst, "wb") as out:
        for line in src:
            out.write(line)
            n += 1
            if n == count:
                break
    return n


def test_reference(commands: Sequence[DocCommand]) -> str:
    """The test references the page's prepare-data reads (what its sacrebleu scores against)."""
    prepare = next(c for c in commands if c.kind == "tf-nmt prepare-data")
    return _option(prepare.argv, "--test-tgt")[0]


def write_inputs(commands: Sequence[DocCommand], work: Path,
                 args: argparse.Namespace) -> Dict[str, Any]:
    """The files the page's downloads would give, under the names its prepare-data reads: the
    generated training corpus cut into its ``--train-src``/``--train-tgt`` files in the
    proportions of :data:`PUBLISHED_PAIRS`, and generated dev and test sets (seed + 1)."""
    prepare = next(c for c in commands if c.kind == "tf-nmt prepare-data")
    src_files, tgt_files = _option(prepare.argv, "--train-src"), _option(prepare.argv, "--train-tgt")
    if len(src_files) != len(PUBLISHED_PAIRS) or len(tgt_files) != len(src_files):
        raise UserError(f"{DOC.name}: the recipe's prepare-data should name "
                        f"{len(PUBLISHED_PAIRS)} training files per side")
    corpus = make_synthetic.ensure(Path(args.corpus_dir), args.pairs, args.seed, False)
    counts = _split_counts(args.pairs, PUBLISHED_PAIRS)
    for side, names in (("xx", src_files), ("yy", tgt_files)):
        with open(Path(args.corpus_dir) / f"train.{side}", "rb") as src:
            for name, count in zip(names, counts):
                if _copy_lines(src, work / name, count) != count:
                    raise UserError(f"{args.corpus_dir}: fewer than {args.pairs} lines")
    held = make_synthetic.ensure(work / "heldout-generated", args.dev + args.test, args.seed + 1,
                                 False)
    split = {"--dev-src": ("xx", 0, args.dev), "--dev-tgt": ("yy", 0, args.dev),
             "--test-src": ("xx", args.dev, args.test), "--test-tgt": ("yy", args.dev, args.test)}
    for option, (side, skip, count) in split.items():
        (name,) = _option(prepare.argv, option)
        with open(work / "heldout-generated" / f"train.{side}", "rb") as src:
            for _ in range(skip):
                next(src)
            _copy_lines(src, work / name, count)
    args.test_ref = test_reference(commands)
    return {"train_files": dict(zip(src_files, counts)), "corpus": str(args.corpus_dir),
            "corpus_seed": corpus.get("seed"), "dev_pairs": args.dev, "test_pairs": args.test,
            "heldout_seed": held.get("seed")}


def _run(argv: List[str], work: Path, log: Path, stdin: Optional[str] = None,
         timeout: float = 7200, **kill: Any) -> Dict[str, Any]:
    print("$", shlex.join(argv) + (f" < {stdin}" if stdin else ""), flush=True)
    if stdin:
        argv = ["bash", "-c", shlex.join(argv) + f" < {shlex.quote(stdin)}"]
    cwd = os.getcwd()
    os.chdir(work)
    try:
        result = run_measured(argv, log, timeout=timeout, **kill)
    finally:
        os.chdir(cwd)
    if not kill:
        check_ok(result, argv, log)
    print(f"  {result['wall_s']:.1f} s, peak RSS {result['peak_rss_mb']:,.0f} MB", flush=True)
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}


def train_kill_resume(argv: List[str], work: Path, args: argparse.Namespace) -> Dict[str, Any]:
    """Run the train command, SIGKILL it 2 log lines after its 2nd checkpoint, run it again."""
    run_dir = Path(argv[argv.index("--run-dir") + 1])
    total = args.steps
    resume_at = 2 * args.cycle
    kill_step = resume_at + 2 * args.log_every
    if kill_step >= min(total, resume_at + args.cycle):
        raise UserError(f"--steps {total}, --cycle {args.cycle}, --log-every {args.log_every}: "
                        f"the kill {2 * args.log_every} steps after the checkpoint at step "
                        f"{resume_at} must come before the next checkpoint and the end")
    killed = _run(argv, work, work / "logs" / "train-killed.log",
                  kill_when=f"step {kill_step:>6}/{total}")
    before = {e["step"]: e["loss"] for e in read_progress_log(run_dir / PROGRESS_LOG)}
    resumed = _run(argv, work, work / "logs" / "train-resumed.log")
    after = read_progress_log(run_dir / PROGRESS_LOG)
    log_text = (work / "logs" / "train-resumed.log").read_text(errors="replace")
    found = re.search(r"resuming from step (\d+)", log_text)
    resumed_step = int(found.group(1)) if found else None
    # Only steps the resumed run trained again count (its progress log keeps those before).
    compared = {s: (before[s], a["loss"]) for a in after for s in [a["step"]]
                if resumed_step is not None and resumed_step < s <= kill_step and s in before}
    return {"killed": killed, "resumed": resumed, "resumed_from": resumed_step,
            "resumed_from_log": resumed_step == resume_at,
            "resume_step": resume_at, "kill_step": kill_step,
            "losses_after_resume": {str(s): {"killed_run": a, "resumed_run": b}
                                    for s, (a, b) in compared.items()},
            "resume_bit_exact": bool(compared) and all(a == b for a, b in compared.values()),
            "loss_curve": [[e["step"], e["loss"]] for e in after],
            "first_loss": after[0]["loss"] if after else None,
            "last_loss": after[-1]["loss"] if after else None,
            "tokens_per_s": [e["tokens_per_s"] for e in after][-3:]}


def big_presets(work: Path, args: argparse.Namespace) -> Dict[str, Any]:
    """transformer-big and gnmt-1024, a few steps each, under horovodrun over an odd shard count."""
    data = Path(args.odd_data_dir)
    manifest = json.loads((data / "corpus" / "manifest.json").read_text())
    shards = int(manifest["shards"]["count"])
    if shards % args.np == 0:
        raise UserError(f"{data}: {shards} shards divide among {args.np} ranks; "
                        "--odd-data-dir should have a shard count they do not divide")
    out: Dict[str, Any] = {"data_dir": str(data), "shards": shards, "ranks": args.np}
    tf_nmt = _venv_tool("tf-nmt")
    for preset in BIG_PRESETS:
        run_dir = work / "runs" / preset
        shutil.rmtree(run_dir, ignore_errors=True)
        sets = [f"train.train_steps={args.big_steps}", f"train.steps_per_cycle={args.big_steps}",
                "train.log_every=1", *args.set]
        argv = [_venv_tool("horovodrun"), "-np", str(args.np), tf_nmt, "train", "--data-dir", str(data),
                "--run-dir", str(run_dir), "--preset", preset, *common.set_args(sets)]
        result = _run(argv, work, work / "logs" / f"train-{preset}.log")
        progress = read_progress_log(run_dir / PROGRESS_LOG)
        meta = json.loads((run_dir / "meta.json").read_text())
        out[preset] = {"command": shlex.join(argv), **result,
                       "losses": [e["loss"] for e in progress],
                       "s_per_step": [e["s_per_step"] for e in progress],
                       "parameters": _parameters(work / "logs" / f"train-{preset}.log"),
                       "precision": meta["runtime"]["precision"]["policy"]}
    return out


def _parameters(log: Path) -> Optional[int]:
    """The parameter count ``tf-nmt train`` prints (``transformer: 209,157,376 parameters``)."""
    found = re.search(r"([\d,]+) parameters", log.read_text(errors="replace"))
    return int(found.group(1).replace(",", "")) if found else None


def _bleu(stdout: str) -> float:
    return float(stdout.strip().split()[-1])


def _save_partial(result: Dict[str, Any], args: argparse.Namespace) -> None:
    """The results so far, marked incomplete, so that a run stopped midway (an hour on 2 cores)
    leaves what it measured; the finished run replaces the file."""
    common.write_result(Path(args.out), {**result, "complete": False}, overwrite=True)


#: settings that name files: compared as resolved paths when --resume checks the earlier run's
PATH_SETTINGS = ("work_dir", "corpus_dir", "odd_data_dir")


#: arguments that do not change what is measured (or are derived during the run)
NOT_SETTINGS = ("argv", "overwrite", "out", "resume", "test_ref")


def settings_of(args: argparse.Namespace) -> Dict[str, Any]:
    """The run's settings, as recorded in its results and compared by ``--resume``."""
    return {k: v for k, v in vars(args).items() if k not in NOT_SETTINGS}


def resumable(path: Path, args: argparse.Namespace) -> Dict[str, Any]:
    """The incomplete results at ``path`` that ``--resume`` continues: refused in one line when
    there are none, when they are complete, or when they were run with other settings."""
    if not path.is_file():
        raise UserError(f"--resume: {path} does not exist (nothing to continue)")
    previous = json.loads(path.read_text())
    if previous.get("complete", True):
        raise UserError(f"--resume: {path} holds a finished run (use --overwrite to run again)")

    def norm(settings: Dict[str, Any]) -> Dict[str, Any]:
        return {k: (str(Path(v).resolve()) if k in PATH_SETTINGS and v else v)
                for k, v in settings.items() if k not in NOT_SETTINGS}

    old, new = norm(previous.get("settings", {})), norm(settings_of(args))
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if changed:
        raise UserError(f"--resume: {path} was run with other settings ({', '.join(changed)})")
    return previous


def run(args: argparse.Namespace, previous: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The recipe; with ``previous`` (an incomplete run's results, ``--resume``) the commands
    and parts it recorded are kept and the rest is run, in the same work directory."""
    work = Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    commands = doc_commands()
    kinds = [c.kind for c in commands]
    expected = ["tf-nmt prepare-data", "horovodrun", "tf-nmt average-checkpoints",
                "tf-nmt evaluate", "tf-nmt translate", "score"]
    if [k for k in kinds if k != "fetch"] != expected:
        raise UserError(f"{DOC.name}: the recipe's commands are {kinds}; this runner knows "
                        f"downloads and then {expected}")
    command = common.command_line("wmt14-recipe", args.argv)
    if previous is not None:
        result = {k: v for k, v in previous.items() if k not in ("complete", "provenance")}
        result["resumed"] = result.get("resumed", []) + [
            {"command": command, "kept_steps": len(result["steps"]),
             "earlier_provenance": previous.get("provenance")}]
        args.test_ref = test_reference(commands)
    else:
        result = {"what": "docs/own-data.md's WMT14 recipe on the generated corpus",
                  "command": command, "substitutions": SUBSTITUTIONS,
                  "settings": settings_of(args), "steps": []}
        result["inputs"] = write_inputs(commands, work, args)
        for stale in ("wmt14-ende", "runs", "logs"):        # every run starts from nothing
            shutil.rmtree(work / stale, ignore_errors=True)
    for cmd in commands[len(result["steps"]):]:
        argv = adapt(cmd, work, args)
        entry: Dict[str, Any] = {"docs": cmd.text, "ran": shlex.join(argv) if argv else None,
                                 "kind": cmd.kind}
        if not argv:
            entry["replaced_by"] = "generated files (inputs)"
        elif cmd.kind == "horovodrun":
            entry.update(train_kill_resume(argv, work, args))
        elif cmd.kind == "score":
            entry.update(_run(argv, work, work / "logs" / "sacrebleu.log", stdin=None))
            entry["bleu"] = _bleu((work / "logs" / "sacrebleu.log").read_text())
        else:
            name = cmd.kind.split()[-1]
            entry.update(_run(argv, work, work / "logs" / f"{name}.log", stdin=cmd.stdin))
            if cmd.kind == "tf-nmt evaluate":
                entry["scores"] = json.loads((work / "evaluate.json").read_text())
        result["steps"].append(entry)
        _save_partial(result, args)
    if "export" not in result:
        result["export"] = export_and_serve(commands, work, args)
        _save_partial(result, args)
    if not args.skip_big:
        result["big_presets"] = big_presets(work, args)
    result["checks"] = checks(result)
    return result


def export_and_serve(commands: Sequence[DocCommand], work: Path,
                     args: argparse.Namespace) -> Dict[str, Any]:
    """Export the averaged checkpoint the page evaluates, serve it on the first test lines and
    compare with the run's own translation of them (``tf-nmt translate`` wrote it)."""
    translate = next(c for c in commands if c.kind == "tf-nmt translate")
    argv = adapt(translate, work, args)
    run_dir, ckpt = argv[argv.index("--run-dir") + 1], argv[argv.index("--checkpoint") + 1]
    source, hyp = work / _option(argv, "--input")[0], work / _option(argv, "--output")[0]
    export_dir = Path(run_dir) / "export"
    tf_nmt = _venv_tool("tf-nmt")
    exported = _run([tf_nmt, "export", "--run-dir", run_dir, "--checkpoint", ckpt,
                     "--export-dir", str(export_dir), "--overwrite"], work,
                    work / "logs" / "export.log")
    head = work / "export-check.src"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:args.serve_lines]
    head.write_text("".join(lines), encoding="utf-8")
    served_path = work / "export-check.hyp"
    served = _run([tf_nmt, "translate", "--export-dir", str(export_dir), "--input", str(head),
                   "--output", str(served_path)], work, work / "logs" / "translate-export.log")
    run_lines = hyp.read_text(encoding="utf-8").splitlines()[:len(lines)]
    export_lines = served_path.read_text(encoding="utf-8").splitlines()
    same = sum(a == b for a, b in zip(run_lines, export_lines))
    return {"export": exported, "serve": served, "lines": len(lines), "same_as_run": same,
            "all_same": same == len(lines) == len(export_lines)}


def checks(result: Dict[str, Any]) -> Dict[str, Any]:
    """What the run must show: loss fell, the resume was bit-exact, the export serves the run."""
    train = next(s for s in result["steps"] if s["kind"] == "horovodrun")
    first, last = train.get("first_loss"), train.get("last_loss")
    out = {"loss_fell": first is not None and last is not None and math.isfinite(last)
           and last < first,
           "resumed": bool(train.get("resumed_from_log")),
           "resume_bit_exact": bool(train.get("resume_bit_exact")),
           "export_serves_the_run": bool(result["export"]["all_same"])}
    if "big_presets" in result:
        out["big_presets_trained"] = all(
            len(result["big_presets"][p]["losses"]) > 0
            and all(math.isfinite(x) for x in result["big_presets"][p]["losses"])
            for p in BIG_PRESETS)
    out["all"] = all(out.values())
    return out



def format_table(result: Dict[str, Any]) -> str:
    lines = ["| command (docs/own-data.md) | wall s | peak RSS MB |", "|---|---:|---:|"]
    for s in result["steps"]:
        if s.get("ran") is None:
            continue
        wall = s.get("wall_s") or (s.get("killed", {}).get("wall_s", 0)
                                   + s.get("resumed", {}).get("wall_s", 0))
        rss = s.get("peak_rss_mb") or max(s.get("killed", {}).get("peak_rss_mb", 0),
                                         s.get("resumed", {}).get("peak_rss_mb", 0))
        lines.append(f"| {s['kind']} | {wall:.0f} | {rss:,.0f} |")
    train = next(s for s in result["steps"] if s["kind"] == "horovodrun")
    lines += ["", f"loss {train['first_loss']:.3f} -> {train['last_loss']:.3f}; killed at step "
              f"{train['kill_step']}, resumed from {train['resume_step']}: bit-exact "
              f"{train['resume_bit_exact']}", f"checks: {result['checks']}"]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments wmt14-recipe",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", default=None,
                   help="default runs/wmt14_recipe (--tiny: a temp dir)")
    p.add_argument("--corpus-dir", default=None,
                   help="the generated corpus (default runs/own_corpus/synthetic-PAIRS, "
                        "generated when missing)")
    p.add_argument("--pairs", type=int, default=4_500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dev", type=int, default=500, help="generated dev pairs (newstest2013)")
    p.add_argument("--test", type=int, default=300, help="generated test pairs (newstest2014)")
    p.add_argument("--np", type=int, default=2, help="horovodrun ranks")
    p.add_argument("--steps", type=int, default=160, help="train.train_steps (page: 60000)")
    p.add_argument("--warmup", type=int, default=400, help="train.warmup_steps (page: 8000)")
    p.add_argument("--cycle", type=int, default=32, help="train.steps_per_cycle (added)")
    p.add_argument("--log-every", type=int, default=8, help="train.log_every (added)")
    p.add_argument("--serve-lines", type=int, default=20, help="test lines served by the export")
    p.add_argument("--odd-data-dir", default="runs/own_corpus/data-450000",
                   help="a prepared corpus with a shard count the ranks do not divide, for the "
                        "big presets (own-corpus-memory's 0.45M corpus: 23 shards)")
    p.add_argument("--big-steps", type=int, default=4, help="steps of each big preset")
    p.add_argument("--skip-big", action="store_true", help="do not train the big presets")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="config override added to every training command")
    p.add_argument("--tiny", action="store_true",
                   help="20,000 pairs, a 1,000-piece vocabulary, a tiny model, 40 steps, no big "
                        "presets, in a temp dir: a check of the code")
    p.add_argument("--out", default=None)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--resume", action="store_true",
                   help="continue the incomplete run whose results --out holds (same settings, "
                        "same work dir): what it recorded is kept, the rest is run")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    args.vocab_size = 32000
    apply_tiny(args, p, {"pairs": 20_000, "dev": 200, "test": 40, "steps": 40, "warmup": 10,
                         "cycle": 8, "log_every": 2, "serve_lines": 5}, model=True)
    if args.tiny:
        args.vocab_size, args.skip_big = 1000, True
    work_default = (Path(tempfile.gettempdir()) / "tf-nmt-wmt14-recipe-tiny" if args.tiny
                    else Path("runs") / "wmt14_recipe")
    args.work_dir = args.work_dir or str(work_default)
    args.corpus_dir = args.corpus_dir or str(
        (Path(args.work_dir) if args.tiny else Path("runs") / "own_corpus")
        / f"synthetic-{args.pairs}")
    args.out = args.out or str(Path(args.work_dir) / "recipe.json" if args.tiny
                               else common.results_path(__file__, "recipe.json"))
    # the big presets' horovodrun runs in the work dir: a relative path must not move with it
    args.odd_data_dir = str(Path(args.odd_data_dir).resolve())
    for name in ("np", "steps", "warmup", "cycle", "log_every", "big_steps", "dev", "test"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.resume and args.overwrite:
        raise UserError("--resume continues the results file and --overwrite replaces it: "
                        "give one")
    previous = resumable(Path(args.out), args) if args.resume else None
    if previous is None:
        common.refuse_existing([Path(args.out)], args.overwrite)
    start = time.perf_counter()
    result = run(args, previous)
    result["complete"] = True
    result["wall_s"] = round(time.perf_counter() - start, 1)
    print("\n" + format_table(result))
    common.write_result(Path(args.out), result, overwrite=True)   # refused at the start if it was there
    print(f"wrote {args.out}")
    return 0 if result["checks"]["all"] else 1
