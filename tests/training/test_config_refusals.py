"""Trainer settings that would be ignored are refused before anything is read or written."""
import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_async_trainer import TINY


def test_elastic_key_without_elastic_training_is_refused(tmp_path):
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "train.elastic_commit_every=7"])
    with pytest.raises(ConfigError, match="elastic_commit_every is used only by elastic training"):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()


def test_negative_bucket_width_is_refused(tmp_path):
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "data.length_bucket_width=-2"])
    with pytest.raises(ConfigError, match="bucket width must be >= 0"):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()
