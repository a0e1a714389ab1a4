"""``python -m experiments wmt14-recipe``: the commands it runs are docs/own-data.md's WMT14
recipe (read from the page, changed only as its substitution table says), and one tiny run of
the whole recipe (prepare, horovodrun -np 2 train killed and resumed, average, evaluate,
translate, sacreBLEU, export) on a 20k-pair generated corpus, results to a temp dir."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import STUDIES
from experiments.wmt14_recipe import recipe
from tf_nmt.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def _args(tmp_path, *extra):
    return recipe.parse_args(["--work-dir", str(tmp_path), *extra])


def test_registered():
    assert STUDIES["wmt14-recipe"] == "experiments.wmt14_recipe.recipe"


def test_the_recipe_is_read_from_the_docs_page_in_order():
    kinds = [c.kind for c in recipe.doc_commands()]
    assert [k for k in kinds if k != "fetch"] == [
        "tf-nmt prepare-data", "horovodrun", "tf-nmt average-checkpoints", "tf-nmt evaluate",
        "tf-nmt translate", "score"]
    assert kinds.count("fetch") >= 5           # wget x3, tar, sacrebleu --echo


def test_the_commands_run_are_the_pages_but_for_the_declared_substitutions(tmp_path):
    args = _args(tmp_path, "--steps", "120", "--warmup", "50")
    args.test_ref = "newstest2014.de"
    commands = {c.kind: c for c in recipe.doc_commands()}
    tf_nmt = str(Path(sys.executable).parent / "tf-nmt")
    for kind in ("tf-nmt prepare-data", "tf-nmt average-checkpoints", "tf-nmt translate"):
        doc, ran = commands[kind].argv, recipe.adapt(commands[kind], tmp_path, args)
        assert len(doc) == len(ran)
        for d, r in zip(doc, ran):      # each word as written, or a declared substitution
            assert r == d or (d.startswith("/shared/") and r == f"{tmp_path}/{d[8:]}") or (
                d.endswith("tf-nmt") and r == tf_nmt), (kind, d, r)
    train = recipe.adapt(commands["horovodrun"], tmp_path, args)
    assert train[0].endswith("horovodrun") and train[1:3] == ["-np", "2"]
    assert "--hostfile" not in train
    assert train[3] == tf_nmt and "transformer-base" in train
    sets = [train[i + 1] for i, w in enumerate(train) if w == "--set"]
    assert "train.train_steps=120" in sets and "train.warmup_steps=50" in sets
    assert "train.backward_passes_per_step=2" in sets and "train.peak_lr=2e-3" in sets
    assert not any(s.startswith("train.train_steps=60000") for s in sets)
    assert recipe.adapt(commands["fetch"], tmp_path, args) == []
    score = recipe.adapt(commands["score"], tmp_path, args)
    assert score[1:] == ["newstest2014.de", "-i", "newstest2014.hyp.de", "-b"]


def test_a_recipe_the_runner_does_not_know_is_refused(tmp_path):
    page = (REPO / "docs" / "own-data.md").read_text()
    odd = page.replace("   tf-nmt average-checkpoints", "   rsync -a x y\n   tf-nmt average-checkpoints")
    (tmp_path / "own-data.md").write_text(odd)
    with pytest.raises(UserError, match="does not know"):
        [c.kind for c in recipe.doc_commands(tmp_path / "own-data.md")]
    no_steps = page.replace("--set train.train_steps=60000", "")
    (tmp_path / "own-data.md").write_text(no_steps)
    train = next(c for c in recipe.doc_commands(tmp_path / "own-data.md") if c.kind == "horovodrun")
    with pytest.raises(UserError, match="train.train_steps"):
        recipe.adapt(train, tmp_path, _args(tmp_path))


def test_tiny_recipe_end_to_end(tmp_path):
    out = tmp_path / "recipe.json"
    proc = subprocess.run([sys.executable, "-m", "experiments", "wmt14-recipe", "--tiny",
                           "--work-dir", str(tmp_path / "work"), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["complete"] is True
    assert result["checks"] == {"loss_fell": True, "resumed": True, "resume_bit_exact": True,
                                "export_serves_the_run": True, "all": True}
    train = next(s for s in result["steps"] if s["kind"] == "horovodrun")
    assert train["killed"]["killed"] and len(train["losses_after_resume"]) == 2
    assert result["inputs"]["train_files"]["training/europarl-v7.de-en.en"] == 20_000 * 1_920_209 // 4_520_620
    assert 0 <= next(s for s in result["steps"] if s["kind"] == "score")["bleu"] <= 100


def test_the_odd_data_dir_does_not_move_with_the_work_dir(tmp_path, monkeypatch):
    """The big presets' horovodrun runs in the work dir: a relative --odd-data-dir is resolved
    where the study was started (it was passed on as given and named a missing directory)."""
    monkeypatch.chdir(tmp_path)
    args = _args(tmp_path / "work", "--odd-data-dir", "runs/odd")
    assert args.odd_data_dir == str(tmp_path / "runs" / "odd")


def _fake_commands(monkeypatch, called):
    def fake_run(argv, work, log, stdin=None, **_):
        called.append(log.name)
        if log.name == "evaluate.log":
            (work / "evaluate.json").write_text('{"bleu": 1.0}')
        if log.name == "sacrebleu.log":
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("BLEU 1.0")
        return {"returncode": 0, "wall_s": 0.0}

    monkeypatch.setattr(recipe, "_run", fake_run)
    monkeypatch.setattr(recipe, "train_kill_resume",
                        lambda argv, work, args: called.append("train") or {"first_loss": 9.0})
    monkeypatch.setattr(recipe, "export_and_serve",
                        lambda commands, work, args: called.append("export") or {"lines": 1})
    monkeypatch.setattr(recipe, "big_presets", lambda work, args: called.append("big") or {})
    monkeypatch.setattr(recipe, "checks", lambda result: {"all": True})


def test_resume_runs_only_what_the_stopped_run_did_not_record(tmp_path, monkeypatch):
    args = _args(tmp_path, "--resume", "--out", str(tmp_path / "recipe.json"))
    commands = recipe.doc_commands()
    done = [i for i, c in enumerate(commands) if c.kind == "tf-nmt average-checkpoints"][0] + 1
    previous = {"what": "x", "command": "first", "settings": recipe.settings_of(args),
                "inputs": {"train_files": {}}, "complete": False,
                "provenance": {"git_revision": "abc"},
                "steps": [{"kind": c.kind, "recorded": True} for c in commands[:done]]}
    called = []
    _fake_commands(monkeypatch, called)
    result = recipe.run(args, previous)
    assert called == ["evaluate.log", "translate.log", "sacrebleu.log", "export", "big"]
    assert [s["kind"] for s in result["steps"]] == [c.kind for c in commands]
    assert all(s.get("recorded") for s in result["steps"][:done])
    assert result["resumed"][0]["kept_steps"] == done
    assert result["resumed"][0]["earlier_provenance"] == {"git_revision": "abc"}
    # a run stopped after its export keeps that too
    called.clear()
    previous = {**result, "complete": False}
    recipe.run(args, previous)
    assert called == ["big"]


def test_resume_is_refused_without_an_incomplete_run_of_the_same_settings(tmp_path):
    out = tmp_path / "recipe.json"
    args = _args(tmp_path, "--resume", "--out", str(out))
    with pytest.raises(UserError, match="does not exist"):
        recipe.resumable(out, args)
    out.write_text(json.dumps({"complete": True, "settings": recipe.settings_of(args)}))
    with pytest.raises(UserError, match="finished run"):
        recipe.resumable(out, args)
    out.write_text(json.dumps({"complete": False,
                               "settings": {**recipe.settings_of(args), "steps": 7}}))
    with pytest.raises(UserError, match=r"other settings \(steps\)"):
        recipe.resumable(out, args)
    out.write_text(json.dumps({"complete": False, "settings": recipe.settings_of(args)}))
    assert recipe.resumable(out, args)["complete"] is False


def test_the_big_presets_parameter_count_is_read_from_the_train_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[1,0]<stdout>:precision: ...\n[1,0]<stdout>:transformer: 209,157,376 parameters, "
                   "vocab 32000, 435,805 train pairs\n")
    assert recipe._parameters(log) == 209_157_376
    log.write_text("nothing here\n")
    assert recipe._parameters(log) is None
