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
