"""Resume without replay (issue 55): an own-corpus run resumed at step N starts each rank's stream
at the position its checkpoint records, so it reads the batches it trains on and not the N
before them, and still sees exactly what an uninterrupted run sees."""
import json

import numpy as np
import pytest

from tests.data.own_corpus_fixture import write_own_corpus
from tests.data.test_streaming import same_batches
from tests.training.test_own_corpus import config, weights
from tf_nmt.compat import tf
from tf_nmt.data.prepared import read_prepared
from tf_nmt.data.streaming import StreamPosition, block_pairs, rank_stream
from tf_nmt.distributed.context import DistContext
from tf_nmt.training import trainer
from tf_nmt.training.data_position import CHECKPOINT_KEY, DataPositions
from tf_nmt.training.trainer import train


@pytest.fixture(scope="module")
def en_fr(tmp_path_factory):
    return write_own_corpus(tmp_path_factory.mktemp("en-fr"), num_shards=3, repeats=1)


def test_a_stream_started_at_a_position_continues_the_uninterrupted_one(en_fr):
    blocks = read_prepared(en_fr).rank_blocks(2, 1, block_pairs(16))

    def stream(start=StreamPosition()):
        return rank_stream(blocks, 64, 16, seed=5, shuffle_buffer=16, bucket_width=1, start=start)

    straight = list(stream().take(80))
    epochs = {int(position[0]) for _, position in straight}
    assert len(epochs) > 2  # the comparison spans several epochs and many windows
    for k in (1, 23, 57):
        epoch, window, index = (int(v) for v in straight[k - 1][1])
        resumed = list(stream(StreamPosition(epoch, window, index + 1)).take(80 - k))
        same_batches([batch for batch, _ in resumed], [batch for batch, _ in straight[k:]])
        assert [p.numpy().tolist() for _, p in resumed] == [p.numpy().tolist()
                                                            for _, p in straight[k:]]


def test_resumed_run_reads_only_the_batches_it_trains_on_and_matches_a_straight_run(
        en_fr, tmp_path, monkeypatch):
    straight, split = tmp_path / "straight", tmp_path / "split"
    whole = train(config(en_fr, "train.train_steps=24"), straight, log=lambda _m: None)
    first = train(config(en_fr, "train.train_steps=20"), split, log=lambda _m: None)
    record = json.loads(tf.train.load_checkpoint(str(split / "checkpoints" / "ckpt-20")).get_tensor(
        f"{CHECKPOINT_KEY}/.ATTRIBUTES/VARIABLE_VALUE"))
    assert record["step"] == 20 and record["world_size"] == 1
    assert record["positions"][0][0] >= 1  # step 20 is past the first data epoch

    real, starts, taken = trainer.rank_stream, [], tf.Variable(0, dtype=tf.int64)

    def counted(blocks, *args, start, **kwargs):  # counts the batches the resumed run reads
        starts.append(start)

        def count(batch, position):
            with tf.control_dependencies([taken.assign_add(1)]):
                return tf.nest.map_structure(tf.identity, (batch, position))
        return real(blocks, *args, start=start, **kwargs).map(count)

    monkeypatch.setattr(trainer, "rank_stream", counted)
    lines = []
    second = train(config(en_fr, "train.train_steps=24"), split, log=lines.append)
    assert (first.final_step, second.resumed_from, second.final_step) == (20, 20, 24)
    epoch, window, index = record["positions"][0]
    assert starts == [StreamPosition(epoch, window, index + 1)]
    assert int(taken.numpy()) == 4  # the 4 batches of steps 21-24, not the 20 before them
    assert any(f"rank 0's data from epoch {epoch}, window {window}" in line for line in lines)
    losses = {h["step"]: h["loss"] for h in first.history + second.history}
    np.testing.assert_allclose([losses[h["step"]] for h in whole.history],
                               [h["loss"] for h in whole.history], rtol=1e-5)
    for x, y in zip(weights(straight), weights(split)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_data_epochs_are_logged(en_fr, tmp_path):
    lines = []
    train(config(en_fr, "train.train_steps=20"), tmp_path / "run", log=lines.append)
    assert any(line.startswith("data epoch 1 begins at step ") for line in lines), lines


def test_without_a_fitting_position_each_rank_starts_its_epoch_over():
    positions, lines = DataPositions(), []
    ctx = DistContext(rank=0, size=1)
    assert positions.start(8, ctx, lines.append) == StreamPosition()  # nothing recorded
    assert "checkpoint records none" in lines[-1] and "\n" not in lines[-1]
    positions.record.assign(json.dumps({"step": 8, "world_size": 2,
                                        "positions": [[3, 1, 4], [2, 5, 0]]}))
    assert positions.start(8, ctx, lines.append) == StreamPosition(3)  # another world size
    assert "with 2 rank(s)" in lines[-1] and "starts data epoch 3 over" in lines[-1]
    positions.record.assign(json.dumps({"step": 8, "world_size": 1, "positions": [[3, 1, 4]]}))
    assert positions.start(8, ctx, lines.append) == StreamPosition(3, 1, 5)
    positions.record.assign(json.dumps({"step": 8, "world_size": 2,
                                        "positions": [[3, 1, 4], [2, 5, 0]]}))
    assert positions.start(8, DistContext(rank=1, size=2), lines.append) == StreamPosition(2, 5, 1)


def test_an_elastic_rollback_starts_after_the_committed_steps_batch_from_memory():
    positions, lines = DataPositions(history=3), []
    ctx = DistContext(rank=1, size=2)
    for step in range(1, 6):  # the batches of steps 1-5 were (0, 0, step - 1)
        positions.current.assign([0, 0, step - 1])
        positions.remember(step, ctx)
    assert sorted(positions.history) == [3, 4, 5]
    assert positions.start(4, ctx, lines.append) == StreamPosition(0, 0, 4)
    assert not lines
    # a process whose rank or world changed cannot use its own stream's history
    assert positions.start(4, DistContext(rank=0, size=2), lines.append) == StreamPosition()
    assert positions.start(4, DistContext(rank=1, size=3), lines.append) == StreamPosition()
    assert len(lines) == 2


@pytest.mark.parametrize("kernel", ["fused", "tf"])
def test_a_resumed_run_draws_the_dropout_masks_of_a_straight_run_bit_for_bit(en_fr, tmp_path,
                                                                            kernel):
    # With dropout on, the masks' seeds must continue from the checkpoint: a stateful random op
    # restarts its stream in the resumed process and the runs part (loss off in the 4th digit).
    sets = ["model.dropout=0.3", f"train.dropout_kernel={kernel}"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    whole = train(config(en_fr, *sets, "train.train_steps=12"), straight, log=lambda _m: None)
    train(config(en_fr, *sets, "train.train_steps=8"), split, log=lambda _m: None)
    assert int(tf.train.load_checkpoint(str(split / "checkpoints" / "ckpt-8")).get_tensor(
        "dropout_draws/.ATTRIBUTES/VARIABLE_VALUE")) > 8        # every layer's mask, every step
    second = train(config(en_fr, *sets, "train.train_steps=12"), split, log=lambda _m: None)
    assert [h["loss"] for h in second.history] == [h["loss"] for h in whole.history
                                                   if h["step"] > 8]
    for x, y in zip(weights(straight), weights(split)):
        np.testing.assert_array_equal(x, y)
    undropped = train(config(en_fr, "model.dropout=0.0", "train.train_steps=12"),
                      tmp_path / "none", log=lambda _m: None)
    assert undropped.history[-1]["loss"] != whole.history[-1]["loss"]   # dropout was on
