"""The quickstart's precision probe: both precisions timed on real batches, the faster chosen."""
import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_async_trainer import TINY


def tiny_config(tmp_path, *extra, base=TINY):
    from tf_nmt.config import load_config
    from tf_nmt.data.data_dir import ensure_vocab

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, base + [f"data.data_dir={data}", *extra])
    ensure_vocab(data, cfg.data.vocab_size, log=lambda _m: None)
    return cfg


def test_probe_times_both_precisions_and_picks_the_faster(tmp_path):
    from tf_nmt.training.autotune import fastest_precision

    lines = []
    choice = fastest_precision(tiny_config(tmp_path), batches=2, rounds=2, log=lines.append)
    times = choice.s_per_step
    assert set(times) == {"float32", "mixed_bfloat16"} and all(t > 0 for t in times.values())
    assert choice.mixed_precision == (times["mixed_bfloat16"] < times["float32"])
    assert choice.as_dict()["chosen"] in lines[0] and choice.rounds == 2
    from tf_nmt.compat import keras
    assert keras.mixed_precision.global_policy().name == "float32"  # nothing left behind


def test_gnmt_is_probed_too(tmp_path):
    from tf_nmt.training.autotune import fastest_precision

    lines = []
    gnmt = ["model.kind=gnmt", "model.num_layers=1", "model.units=32", "data.vocab_size=320",
            "data.batch_tokens=256"]
    cfg = tiny_config(tmp_path, base=gnmt)
    choice = fastest_precision(cfg, batches=1, rounds=1, log=lines.append)
    assert set(choice.s_per_step) == {"float32", "mixed_bfloat16"} and len(lines) == 1


def test_quickstart_refuses_the_precision_twice(tmp_path):
    from tf_nmt.errors import UsageError
    from tf_nmt.commands.quickstart import run_quickstart

    with pytest.raises(UsageError, match="give the precision once"):
        run_quickstart(tmp_path / "d", tmp_path / "r", tmp_path / "e", tmp_path / "q.json",
                       overrides=["train.mixed_precision=false"], precision="bfloat16")
    with pytest.raises(UsageError, match="--precision 'fp16'"):
        run_quickstart(tmp_path / "d", tmp_path / "r", tmp_path / "e", tmp_path / "q.json",
                       precision="fp16")
    with pytest.raises(UsageError, match="give the time budget once"):
        run_quickstart(tmp_path / "d", tmp_path / "r", tmp_path / "e", tmp_path / "q.json",
                       minutes=30, overrides=["train.time_budget_minutes=0"])
    with pytest.raises(UsageError, match="no time budget and no step limit"):
        run_quickstart(tmp_path / "d", tmp_path / "r", tmp_path / "e", tmp_path / "q.json",
                       minutes=0)
    assert not any(tmp_path.iterdir())
