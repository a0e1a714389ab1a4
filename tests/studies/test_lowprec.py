"""The Table 7.4 study (`python -m experiments lowprec`): its argument checks, its table, and one tiny end
to end run (Transformer only) whose four fine-tunes start from the same baseline with the same
budget, whose activation scale is fitted on the baseline and frozen into the last run, and whose
kernel translations are those of the log-space kernels on the same packed model: non-empty and
identical to the emulation's."""
import json

import pytest

from tests.helpers import write_toy_data_dir
from tf_nmt.config import load_config
from experiments import STUDIES
from experiments.lowprec import study


def test_registered_as_a_study():
    assert STUDIES["lowprec"] == "experiments.lowprec.study"


@pytest.mark.parametrize("argv, message", [
    (["--models", "transformer,rnn"], "unknown model kind"),
    (["--finetune-steps", "0"], "--finetune-steps must be >= 1"),
    (["--calibration-batches", "0"], "--calibration-batches must be >= 1"),
])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        study.parse_args(argv)
    assert message in capsys.readouterr().err


def test_an_existing_results_file_is_not_overwritten(tmp_path):
    results = tmp_path / "lowprec.json"
    results.write_text("{}")
    with pytest.raises(SystemExit, match="exists"):
        study.main(["--results", str(results), "--work-dir", str(tmp_path)])
    assert results.read_text() == "{}"


def test_table_puts_the_thesis_beside_ours():
    rows = {"fp32": {"bleu": 8.0}, "fp32_finetuned": {"bleu": 8.5},
            "weights_4bit": {"bleu": 7.9}, "dot_products_4bit": {"bleu": 7.0, "kernel_bleu": 7.0}}
    thesis = {"fp32": 35.66, "weights_4bit": 35.47, "dot_products_4bit": 35.05}
    text = study.format_table({"models": {"transformer": {"rows": rows, "thesis": thesis}}})
    assert "| transformer | 4-bit log weights, re-trained | 7.90 | -0.10 | 35.47 | -0.19 |" in text
    assert "| transformer | + 4-bit log dot products, re-trained | 7.00 | -1.00 | 35.05 | -0.61 |" in text
    assert "| transformer | fp32, fine-tuned (control) | 8.50 | +0.50 | - | - |" in text


@pytest.mark.slow
def test_tiny_study_end_to_end(tmp_path):
    results = tmp_path / "lowprec.json"
    argv = ["--tiny", "--models", "transformer", "--work-dir", str(tmp_path / "work"),
            "--results", str(results), "--eval-limit", "4"]
    assert study.main(argv, toy_data=write_toy_data_dir) == 0
    res = json.loads(results.read_text())
    assert res["complete"] and not res["table_7_5"]["forced_scalar_env"]
    model = res["models"]["transformer"]
    rows, runs = model["rows"], model["runs"]
    assert set(rows) == {"fp32", "fp32_finetuned", "weights_4bit", "dot_products_4bit"}
    cfgs = {name: load_config(f"{path}/config.yaml") for name, path in runs.items()}
    tuned = [c for name, c in cfgs.items() if name != "fp32"]
    assert {c.train.init_from for c in tuned} == {runs["fp32"]}
    assert {c.train.train_steps for c in tuned} == {10}  # the same budget for every row
    assert cfgs["weights_4bit"].train.quantize_bits == 4
    assert cfgs["weights_4bit"].train.quantize_activations_bits == 0
    dots = cfgs["dot_products_4bit"].train
    assert (dots.quantize_bits, dots.quantize_activations_bits) == (4, 4)
    assert dots.quantize_activations_scale == pytest.approx(rows["dot_products_4bit"]["activation_scale"])
    assert rows["dot_products_4bit"]["activation_scale"] > 0
    # the kernels compute the same quantised products as the emulation: the same translations,
    # and real ones (an engine that emitted nothing would also "agree" at BLEU 0)
    dots_row = rows["dot_products_4bit"]
    assert dots_row["sentences"] == 4
    assert dots_row["empty_translations"] == {"emulated": 0, "lowprec": 0}
    assert all(ex["emulated"].strip() for ex in dots_row["examples"])
    assert dots_row["kernel_identical_to_emulated"] == dots_row["sentences"]
    assert dots_row["kernel_bleu"] == dots_row["bleu"]
    assert model["dot_product_cost_bleu"] == round(
        rows["weights_4bit"]["bleu"] - rows["dot_products_4bit"]["bleu"], 2)
    assert set(res["table_7_5"]["dot"]["summary"]) == {"fp32", "int8", "shift16", "lut8"}
