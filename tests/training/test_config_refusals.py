"""Trainer settings that would be ignored are refused before anything is read or written."""
import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_async_trainer import TINY


@pytest.mark.parametrize("override, message", [
    ("train.elastic_commit_every=7", "elastic_commit_every=7 would be ignored: .*used only by "
                                     "elastic training"),
    ("train.decay_every=5", "decay_every=5 would be ignored: train.schedule=warmup_inverse_sqrt"),
    ("train.quantize_kind=fixed", "quantize_kind='fixed' would be ignored: .*quantize_bits > 0"),
    ("train.init_embeddings=exclude", "init_embeddings='exclude' would be ignored: .*init_from"),
    ("train.steps_per_execution=3", "must divide train.steps_per_cycle=250, train.log_every=50$"),
])
def test_refused_before_anything_is_written(tmp_path, override, message):
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", override])
    with pytest.raises(ConfigError, match=message):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("section, key, value, message", [
    ("data", "length_bucket_width", -2, "bucket width must be >= 0"),
    ("train", "steps_per_execution", 0, "steps_per_execution must be >= 1"),
])
def test_out_of_range_values_set_in_code_are_refused_too(tmp_path, section, key, value, message):
    """load_config refuses these already (tests/test_config_ranges.py); a Config changed in code
    after loading is still checked by the trainer."""
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}"])
    setattr(getattr(cfg, section), key, value)
    with pytest.raises(ConfigError, match=message):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides, message", [
    (["train.quantize_bits=4"], r"cannot be used with train.quantize_bits \(re-quantises"),
    (["train.comm=graddrop"], r"train.comm=graddrop \(acts between steps\)"),
    (["train.backward_passes_per_step=2"], r"train.backward_passes_per_step > 1 \(Horovod's"),
])
def test_several_steps_per_call_refuse_per_step_callbacks(tmp_path, overrides, message):
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "train.steps_per_execution=2",
                                    *overrides])
    with pytest.raises(ConfigError, match=message):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()
