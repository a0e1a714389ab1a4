"""tf-nmt training with a non-default train.comm (one process): it trains and reports bytes."""
import json

import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.training.trainer import train

pytestmark = [pytest.mark.keras2, pytest.mark.slow]


def test_graddrop_run_trains_and_writes_comm_stats(tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    cfg = tiny_config(data, "train.train_steps=40", "train.steps_per_cycle=20", "train.comm=graddrop",
                      "train.drop_ratio=0.9", "train.drop_warmup_steps=10",
                      "train.local_gradients=true", "train.average_every=20")
    result = train(cfg, tmp_path / "run", log=lambda _m: None)
    assert result.final_step == 40
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.8 * losses[0]
    stats = json.loads((tmp_path / "run" / "comm_stats.json").read_text())
    assert stats["mode"] == "graddrop" and stats["steps"] == 40 and stats["syncs"] == 2
    late = stats["per_step"][-2]  # step 39: no parameter average in it
    assert late["drop_ratio"] == pytest.approx(0.9)
    assert late["dense_bytes"] / late["sent_bytes"] > 5
