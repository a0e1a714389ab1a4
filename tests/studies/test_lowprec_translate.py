"""Translating with the log-space kernels: `tf-nmt translate/evaluate --lowprec` on a tiny run
trained with quantised matmul inputs and 4-bit weights, their refusal for a float run, and the
lowprec-translate study end to end (tiny, one round)."""
import json

import pytest

pytestmark = pytest.mark.slow  # trains tiny models first

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.cli import main as cli
from experiments import STUDIES
from experiments import run_study
from tf_nmt.training.trainer import train

QUANT = ["train.quantize_activations_bits=4", "train.quantize_activations_scale=2.0",
         "train.quantize_bits=4"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lowprec_translate")
    data_dir = write_toy_data_dir(root / "data")
    steps = ["train.train_steps=40", "train.steps_per_cycle=20"]
    train(tiny_config(data_dir, *steps, *QUANT), root / "quant", log=lambda _m: None)
    train(tiny_config(data_dir, *steps), root / "float", log=lambda _m: None)
    return root


def test_translate_and_evaluate_with_the_kernels(runs, tmp_path, capsys):
    src = tmp_path / "in.en"
    src.write_text("The file is new.\nThe dog is old.\n")
    for flags, out in (([], "emulated.de"), (["--lowprec"], "lowprec.de")):
        assert cli(["translate", "--run-dir", str(runs / "quant"), "--input", str(src),
                    "--output", str(tmp_path / out), "--beam-size", "2", *flags]) == 0
    # exact integer sums vs float32 sums of the same products: the same words on this model,
    # and words at all (two empty outputs would also be equal)
    emulated = (tmp_path / "emulated.de").read_text().splitlines()
    assert len(emulated) == 2 and all(line.strip() for line in emulated)
    assert (tmp_path / "lowprec.de").read_text().splitlines() == emulated
    report = tmp_path / "eval.json"
    assert cli(["evaluate", "--run-dir", str(runs / "quant"), "--lowprec", "--limit", "3",
                "--output-json", str(report)]) == 0
    assert json.loads(report.read_text())["matmul_engine"] == "lowprec"
    assert "matmuls: lowprec" in capsys.readouterr().out


def test_lowprec_refuses_a_run_without_quantised_inputs(runs, tmp_path, capsys):
    src = tmp_path / "in.en"
    src.write_text("The file is new.\n")
    assert cli(["translate", "--run-dir", str(runs / "float"), "--input", str(src), "--lowprec"]) == 2
    assert "train.quantize_activations_bits=4" in capsys.readouterr().err


def test_study_writes_speed_and_bleu_of_each_engine(runs, tmp_path):
    assert STUDIES["lowprec-translate"] == "experiments.lowprec.translate"
    assert STUDIES["lowprec-kernels"] == "experiments.lowprec.kernels"
    out = tmp_path / "lt.json"
    assert run_study("lowprec-translate", ["--run-dir", str(runs / "quant"), "--limit", "4",
                                           "--rounds", "1", "--beam-size", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["sentences_per_s"]) == {"fp32", "int8", "lowprec"}
    assert all(v > 0 for v in report["sentences_per_s"].values())
    assert set(report["bleu"]) == {"emulated", "fp32", "int8", "lowprec"}
    assert report["empty_translations"] == {"emulated": 0, "fp32": 0, "int8": 0, "lowprec": 0}
    assert report["identical_to_emulated"]["lowprec"] == 4  # the kernel reproduces the emulation
    assert report["bleu"]["lowprec"] == report["bleu"]["emulated"]
    assert report["lowprec_weights"]["encoded_exactly"] > 0
    assert report["lowprec_weights"]["quantised_on_load"] == 0  # re-trained weights are on the grid
    assert report["sentences"] == 4 and report["beam_size"] == 2 and report["trained_steps"] == 40
