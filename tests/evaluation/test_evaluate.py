"""evaluate_run on a trained toy run: hypotheses written, scores consistent, bad run dirs refused."""
import pytest

pytestmark = pytest.mark.slow  # trains a tiny model first

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.evaluation.bleu import corpus_bleu
from tf_nmt.evaluation.evaluate import evaluate_run
from tf_nmt.run_dir import RunDirError
from tf_nmt.training.trainer import train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    data_dir = write_toy_data_dir(root / "data")
    train(tiny_config(data_dir, "train.train_steps=60", "train.steps_per_cycle=30"), root / "run",
          log=lambda _m: None)
    return root / "run", data_dir


def test_report_matches_the_written_hypotheses(trained):
    run, data_dir = trained
    lines = []
    report = evaluate_run(run, split="dev", beam_size=2, limit=7, log=lines.append)
    hyps = (run / "dev.hyp.de").read_text().splitlines()
    refs = (data_dir / "corpus" / "dev.de").read_text().splitlines()[:7]
    assert report["sentences"] == len(hyps) == 7 and report["beam_size"] == 2
    assert report["bleu"] == pytest.approx(corpus_bleu(hyps, refs).score)
    assert [e["hypothesis"] for e in report["examples"]] == hyps[:5]
    assert any(line.startswith("BLEU = ") for line in lines)
    # no quantised matmuls in this model: no matmul engine is named (it would run nothing)
    timing = next(line for line in lines if "sentences translated in" in line)
    assert "matmuls" not in timing and timing.endswith(" weights)"), timing


def test_missing_run_and_checkpoint_are_one_clear_error(trained, tmp_path):
    run, _ = trained
    with pytest.raises(RunDirError, match="not a tf-nmt run directory"):
        evaluate_run(tmp_path / "nothing", log=lambda _m: None)
    with pytest.raises(RunDirError, match="not found"):
        evaluate_run(run, checkpoint=str(run / "checkpoints" / "ckpt-999"), log=lambda _m: None)
