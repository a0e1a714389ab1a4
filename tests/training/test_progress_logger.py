"""ProgressLogger's rate: measured target tokens, total over workers and per worker."""
import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.models.losses import TokenCount
from tf_nmt.training.callbacks import ProgressLogger


def fit_with(logger):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Embedding(10, 4), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[TokenCount(name="tokens")])
    x = np.ones([8, 5], np.int32)
    y = np.array([[1, 2, 3, 0, 0]] * 8, np.int32)  # 3 non-pad target tokens per sentence
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[logger])


def test_single_worker_line_has_no_per_rank_part():
    lines = []
    logger = ProgressLogger(2, 4, log=lines.append)
    fit_with(logger)
    assert len(lines) == 2 and "/rank" not in lines[0]
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(entry["tokens_per_s_per_rank"])
    assert entry["tokens_per_s"] == pytest.approx(2 * 2 * 3 / (entry["s_per_step"] * 2))


def test_total_sums_ranks_and_per_rank_divides():
    lines, seen = [], []

    def summed(local):  # stands in for an allreduce over 2 ranks: the other one saw 3x more
        seen.append(local)
        return 4 * local

    logger = ProgressLogger(2, 4, log=lines.append, world_size=2, sum_across_ranks=summed)
    fit_with(logger)
    assert seen == [12.0, 12.0]  # local tokens per logging window (2 steps x 2 sentences x 3)
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(48 / (2 * entry["s_per_step"]))
    assert entry["tokens_per_s_per_rank"] == pytest.approx(entry["tokens_per_s"] / 2)
    assert f"{entry['tokens_per_s']:,.0f} tgt tok/s ({entry['tokens_per_s_per_rank']:,.0f}/rank)" in lines[0]


def test_without_sum_scales_local_count():
    logger = ProgressLogger(4, 4, log=lambda _m: None, world_size=3)
    fit_with(logger)
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(3 * 4 * 2 * 3 / (4 * entry["s_per_step"]))
