"""``train.quantize_bits`` in the real trainer: the run learns, every checkpointed matrix is on
the log grid, and resuming restores the residuals so the run continues exactly."""
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # trains a tiny model three times

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt import cli
from tf_nmt.quantization.packed_file import read_packed
from tf_nmt.run_dir import load_trained_model
from tf_nmt.training.trainer import train

QUANT = ["train.quantize_bits=4", "train.steps_per_cycle=10"]


def on_log_grid(w: np.ndarray, bits: int = 4) -> bool:
    """Every magnitude is max|w| / 2^k for an integer 0 <= k < 2^(bits-1)."""
    mags = np.abs(w[w != 0]).astype(np.float64)
    k = np.log2(mags.max() / mags)
    return bool(np.all(k == np.round(k)) and k.max() < (1 << (bits - 1)))


def test_quantized_training_learns_stays_on_grid_and_resumes_exactly(tmp_path):
    data_dir = write_toy_data_dir(tmp_path / "data")
    straight = train(tiny_config(data_dir, "train.train_steps=20", *QUANT), tmp_path / "straight",
                     log=lambda _m: None)
    losses = [h["loss"] for h in straight.history]
    assert losses[-1] < 0.8 * losses[0]
    model, _, _ = load_trained_model(tmp_path / "straight")
    matrices = [w for w in model.weights if len(w.shape) == 2]
    assert matrices and all(on_log_grid(w.numpy()) for w in matrices)
    assert all(np.unique(w.numpy()).size > 16 for w in model.weights if len(w.shape) == 1)  # fp32

    # Packing the re-trained weights is lossless: they already are on the grid.
    packed_path = tmp_path / "q4.tfq"
    assert cli.main(["quantize", "--run-dir", str(tmp_path / "straight"), "--bits", "4",
                     "--output", str(packed_path)]) == 0
    packed = read_packed(packed_path)
    assert packed.policy.bits == 4 and packed.config["train"]["quantize_bits"] == 4
    from tf_nmt.run_dir import RunDir, load_trained_checkpoint
    latest = RunDir(tmp_path / "straight").latest_checkpoint()
    assert packed.info == {"source_checkpoint": latest, "weights": "raw",  # resolved once
                           "languages": ["en", "de"]}
    assert load_trained_checkpoint(tmp_path / "straight")[3] == latest
    for w, e in zip(model.get_weights(), packed.entries):
        np.testing.assert_array_equal(e.dequantize(packed.policy), w)
    assert cli.main(["quantize", "--run-dir", str(tmp_path / "straight"), "--output", str(packed_path)]) == 2
    packed_path.write_bytes(packed_path.read_bytes()[:-1])
    assert cli.main(["export", "--quantized", str(packed_path), "--export-dir", str(tmp_path / "e")]) == 2
    assert not (tmp_path / "e").exists()

    train(tiny_config(data_dir, "train.train_steps=10", *QUANT), tmp_path / "split", log=lambda _m: None)
    train(tiny_config(data_dir, "train.train_steps=20", *QUANT), tmp_path / "split", log=lambda _m: None)
    resumed, _, _ = load_trained_model(tmp_path / "split")
    for a, b in zip(model.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bad_quantization_config_is_a_clear_error(tmp_path):
    data_dir = write_toy_data_dir(tmp_path / "data")
    with pytest.raises(ValueError, match="train.quantize_scale: unknown scale 'mean'"):
        train(tiny_config(data_dir, "train.train_steps=2", "train.quantize_bits=4",
                          "train.quantize_scale=mean"), tmp_path / "run", log=lambda _m: None)
