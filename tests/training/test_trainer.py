"""Training runs on a toy corpus: loss falls, resume continues the same run exactly, guards."""
import warnings

import numpy as np
import pytest

pytestmark = [pytest.mark.keras2, pytest.mark.slow]  # each test trains a (tiny) model for real

from tests.helpers import write_toy_data_dir
from tf_nmt.config import load_config
from tf_nmt.run_dir import RunDirError, load_trained_model
from tf_nmt.training.callbacks import DivergenceError
from tf_nmt.training.trainer import train

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
        "model.ff_dim=64", "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
        "train.peak_lr=0.003", "train.warmup_steps=10", "train.log_every=5", "train.seed=7"]


def tiny_config(data_dir, *extra):
    return load_config(None, TINY + [f"data.data_dir={data_dir}", *extra])


@pytest.fixture()
def data_dir(tmp_path):
    return write_toy_data_dir(tmp_path / "data")


def weights(run_dir):
    model, _, _ = load_trained_model(run_dir)
    return [w.copy() for w in model.get_weights()]


def test_loss_falls_and_outputs_are_written(data_dir, tmp_path):
    run = tmp_path / "run"
    result = train(tiny_config(data_dir, "train.train_steps=60", "train.steps_per_cycle=20"), run,
                   log=lambda _m: None)
    assert result.final_step == 60
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.6 * losses[0]
    assert len(result.val_loss) == 3 and result.val_loss[-1] < result.val_loss[0]
    for name in ("config.yaml", "meta.json", "vocab.model", "checkpoints/checkpoint"):
        assert (run / name).exists(), name
    assert any((run / "logs").rglob("events.out.tfevents.*"))
    assert all(h["tokens_per_s"] > 0 for h in result.history[1:])


def test_resume_continues_the_same_run(data_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    train(tiny_config(data_dir, "train.train_steps=20", "train.steps_per_cycle=10"), straight,
          log=lambda _m: None)
    first = train(tiny_config(data_dir, "train.train_steps=10", "train.steps_per_cycle=10"), split,
                  log=lambda _m: None)
    assert first.final_step == 10
    second = train(tiny_config(data_dir, "train.train_steps=20", "train.steps_per_cycle=10"), split,
                   log=lambda _m: None)
    assert second.resumed_from == 10 and second.final_step == 20
    # Optimizer state, step counter and position in the data stream were all restored, so the
    # interrupted run ends exactly where the uninterrupted one does.
    for x, y in zip(weights(straight), weights(split)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_step_count_is_exact_off_the_cycle_grid(data_dir, tmp_path):
    run = tmp_path / "run"
    first = train(tiny_config(data_dir, "train.train_steps=7", "train.steps_per_cycle=5"), run,
                  log=lambda _m: None)
    assert first.final_step == 7  # not rounded up to the next whole cycle (10)
    second = train(tiny_config(data_dir, "train.train_steps=12", "train.steps_per_cycle=5"), run,
                   log=lambda _m: None)
    assert second.resumed_from == 7 and second.final_step == 12
    assert max(int(p.name[5:-6]) for p in (run / "checkpoints").glob("ckpt-*.index")) == 12


def test_several_steps_per_call_train_the_same_run(data_dir, tmp_path):
    # train.steps_per_execution runs 5 steps per call of the train function: the same steps on
    # the same batches, logged and checkpointed at the same steps, also when it resumes a run.
    straight, grouped, resumed = tmp_path / "straight", tmp_path / "grouped", tmp_path / "resumed"
    common = ("train.train_steps=20", "train.steps_per_cycle=10")
    one = train(tiny_config(data_dir, *common), straight, log=lambda _m: None)
    five = train(tiny_config(data_dir, *common, "train.steps_per_execution=5"), grouped,
                 log=lambda _m: None)
    assert five.final_step == 20 and len(five.val_loss) == 2
    # each cycle's dev loss over the whole dev set (Keras 3 keeps its dev iterator across
    # epochs: a dev set of unknown size ran out in the second cycle)
    np.testing.assert_allclose(five.val_loss, one.val_loss, rtol=1e-4)
    assert [h["step"] for h in five.history] == [h["step"] for h in one.history] == [5, 10, 15, 20]
    np.testing.assert_allclose([h["loss"] for h in five.history],
                               [h["loss"] for h in one.history], rtol=1e-4)
    assert sorted(p.name for p in (grouped / "checkpoints").glob("ckpt-*.index")) == [
        "ckpt-10.index", "ckpt-20.index"]
    train(tiny_config(data_dir, "train.train_steps=10", "train.steps_per_cycle=10"), resumed,
          log=lambda _m: None)
    again = train(tiny_config(data_dir, *common, "train.steps_per_execution=5"), resumed,
                  log=lambda _m: None)
    assert again.resumed_from == 10 and again.final_step == 20
    for x, y, z in zip(weights(straight), weights(grouped), weights(resumed)):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(z, x, rtol=1e-4, atol=1e-5)


def test_dev_passes_do_not_warn_that_the_input_ran_out(data_dir, tmp_path):
    # Keras 3 warns "Your input ran out of data; interrupting training" after a pass over a
    # dataset of unknown size: each cycle's dev loss did, a scary line every cycle of a run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(tiny_config(data_dir, "train.train_steps=10", "train.steps_per_cycle=5"),
                       tmp_path / "run", log=lambda _m: None)
    assert len(result.val_loss) == 2
    assert not [w for w in caught if "ran out of data" in str(w.message)]


def test_several_steps_per_call_refuse_a_resume_off_their_grid(data_dir, tmp_path):
    from tf_nmt.config import ConfigError

    run = tmp_path / "run"
    train(tiny_config(data_dir, "train.train_steps=7", "train.steps_per_cycle=5"), run,
          log=lambda _m: None)
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with pytest.raises(ConfigError, match="resumes from step 7, not a multiple of "
                                          "train.steps_per_execution=5"):
        train(tiny_config(data_dir, "train.train_steps=20", "train.steps_per_cycle=10",
                          "train.steps_per_execution=5"), run, log=lambda _m: None)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_resume_with_a_different_vocabulary_is_refused(data_dir, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(data_dir, "train.train_steps=5", "train.steps_per_cycle=5"), run, log=lambda _m: None)
    before = (run / "meta.json").read_bytes(), sorted(p.name for p in (run / "checkpoints").iterdir())
    other_data = write_toy_data_dir(tmp_path / "other-data", repeats=1, reverse=True)
    with pytest.raises(RunDirError, match="vocabulary"):
        train(tiny_config(other_data, "train.train_steps=10"), run, log=lambda _m: None)
    with pytest.raises(RunDirError, match="model_hparams"):
        train(tiny_config(data_dir, "train.train_steps=10", "model.d_model=48"), run, log=lambda _m: None)
    after = (run / "meta.json").read_bytes(), sorted(p.name for p in (run / "checkpoints").iterdir())
    assert before == after  # nothing was overwritten


def test_nan_loss_stops_with_a_clear_error(data_dir, tmp_path):
    cfg = load_config(None, [o for o in TINY if not o.startswith("train.warmup_steps=")]  # constant
                      + [f"data.data_dir={data_dir}", "train.train_steps=50", "train.steps_per_cycle=10",
                         "train.peak_lr=1e30", "train.optimizer=sgd", "train.schedule=constant"])
    with pytest.raises(DivergenceError, match="diverged"):
        train(cfg, tmp_path / "run", log=lambda _m: None)
