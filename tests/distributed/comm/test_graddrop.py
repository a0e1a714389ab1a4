"""GradDropExchange in one process: ranks simulated by concatenating their encoded tensors."""
import math

import numpy as np
import pytest

from tf_nmt.compat import tf
from tf_nmt.distributed import accounting
from tf_nmt.distributed.comm.graddrop import (GradDropExchange, dense_fallback_below,
                                              ramped_drop_ratio, sampling_seed, sparse_payload_bytes)
from tf_nmt.distributed.comm.settings import CommSettings
from tf_nmt.ops import densify, grad_drop_global, one_bit_quantize

SHAPES = [(40, 30), (30,), (7, 11, 5)]


def grads(seed):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=s).astype(np.float32)) for s in SHAPES]


def make(**kw):
    base = dict(mode="graddrop", drop_ratio=0.9, drop_warmup_steps=0)
    base.update(kw)
    return CommSettings(**base)


def flat(ts):
    return np.concatenate([np.asarray(t).ravel() for t in ts])


@pytest.mark.parametrize("per_tensor", [False, True])
def test_two_simulated_ranks_sum_what_each_kept(per_tensor):
    ex = GradDropExchange(make(per_tensor=per_tensor), SHAPES, num_ranks=2)
    sent, expect, mass = [], np.zeros(ex.total), []
    for rank in range(2):
        g, r = grads(rank), grads(10 + rank)
        positions, values, new_res = ex.drop(g, r, tf.constant(0.9))
        sent.append(ex.encode(positions, values))
        # reference: the op's own output, densified tensor by tensor
        ref = grad_drop_global(g, r, 0.9, seed=0, per_tensor=per_tensor)
        expect += flat([densify(i, v, s) for (i, v, _), s in zip(ref, SHAPES)])
        mass.append(flat(g) + flat(r) - flat(new_res))
    gathered = [tf.concat([s[k] for s in sent], 0) for k in range(3)]
    pos, vals = ex.decode(gathered)
    summed = tf.scatter_nd(pos[:, None], vals, [ex.total]).numpy()
    np.testing.assert_allclose(summed, expect, rtol=0, atol=1e-6)
    np.testing.assert_allclose(summed, mass[0] + mass[1], rtol=0, atol=1e-5)  # sent + kept = g + r
    kept = sum(int(tf.size(s[0])) for s in sent)
    assert 0.05 * ex.total < kept / 2 < 0.2 * ex.total


def test_single_rank_update_is_sparse_and_residual_keeps_the_rest():
    ex = GradDropExchange(make(), SHAPES, num_ranks=1)
    g = grads(1)
    residuals = [tf.Variable(tf.zeros(s)) for s in SHAPES]
    update = flat(ex.exchange(g, residuals, tf.constant(0, tf.int64)))
    res = flat([r.numpy() for r in residuals])
    np.testing.assert_allclose(update + res, flat(g), rtol=0, atol=1e-6)
    assert np.count_nonzero(update) == ex.kept.numpy()
    assert np.all((update == 0) | (res == 0))
    stats = ex.step_stats()
    assert stats["sent_bytes"] == ex.kept.numpy() * (2 + 4) + 4 * 1  # uint16 + float32, 1 block
    assert stats["density"] == pytest.approx(ex.kept.numpy() / ex.total)


@pytest.mark.parametrize("per_tensor", [False, True])
def test_kept_entries_are_counted_per_tensor(per_tensor):
    """The per-tensor counts are those of the op's own selection, tensor by tensor."""
    ex = GradDropExchange(make(per_tensor=per_tensor), SHAPES, num_ranks=1,
                          names=["w", "b", "conv"])
    g, r = grads(3), grads(4)
    residuals = [tf.Variable(t) for t in r]
    ex.exchange(g, residuals, tf.constant(0, tf.int64))
    stats = ex.tensor_stats()
    ref = grad_drop_global(g, r, 0.9, seed=sampling_seed(0, 0), per_tensor=per_tensor)
    assert stats["names"] == ["w", "b", "conv"] and stats["sizes"] == [1200, 30, 385]
    assert stats["kept"] == [int(tf.size(i)) for i, _, _ in ref]
    assert sum(stats["kept"]) == ex.kept.numpy()
    scaled = [g[0] * 100.0, g[1], g[2] * 0.01]  # one tensor's gradients dwarf another's
    ex.exchange(scaled, residuals, tf.constant(1, tf.int64))
    kept = ex.tensor_stats()["kept"]
    if per_tensor:  # every tensor keeps its own top 10%
        assert all(k > 0 for k in kept)
    else:  # one global threshold: the small tensor is starved this step
        assert kept[2] == 0 and kept[0] > 0


def test_tensor_names_must_match_the_shapes():
    with pytest.raises(ValueError, match="2 names for 3 tensors"):
        GradDropExchange(make(), SHAPES, num_ranks=1, names=["a", "b"])
    assert GradDropExchange(make(), SHAPES, num_ranks=1).tensor_stats()["names"] == [
        "tensor_0", "tensor_1", "tensor_2"]


def test_local_gradients_with_one_rank_apply_the_local_gradient():
    """N = 1: C = G - S + L = L exactly, whatever was dropped."""
    ex = GradDropExchange(make(local_gradients=True), SHAPES, num_ranks=1)
    g = grads(2)
    residuals = [tf.Variable(tf.ones(s)) for s in SHAPES]
    update = ex.exchange(g, residuals, tf.constant(5, tf.int64))
    np.testing.assert_allclose(flat(update), flat(g), rtol=0, atol=1e-6)


def test_without_error_feedback_dropped_mass_is_lost():
    ex = GradDropExchange(make(error_feedback=False), SHAPES, num_ranks=1)
    g = grads(3)
    update = flat(ex.exchange(g, None, tf.constant(0, tf.int64)))
    assert 0 < np.count_nonzero(update) < 0.2 * ex.total
    np.testing.assert_array_equal(update[update != 0], flat(g)[update != 0])


def test_zero_drop_ratio_is_dense_average():
    ex = GradDropExchange(make(drop_ratio=0.0), SHAPES, num_ranks=1)
    g = grads(4)
    np.testing.assert_array_equal(flat(ex.exchange(g, None, tf.constant(0, tf.int64))), flat(g))


def test_one_bit_values_decode_to_the_quantised_values():
    ex = GradDropExchange(make(one_bit=True), SHAPES, num_ranks=1)
    g, r = grads(5), [tf.zeros(s) for s in SHAPES]
    positions, values, new_res = ex.drop(g, r, tf.constant(0.9))
    pos, vals = ex.decode(ex.encode(positions, values))
    np.testing.assert_array_equal(pos.numpy(), positions.numpy())
    np.testing.assert_allclose(vals.numpy(), values.numpy(), rtol=1e-6, atol=0)
    # reference: the 1-bit op on tensor 0 (each tensor is quantised on its own)
    i0, v0, r0 = grad_drop_global(g, r, 0.9)[0]
    q0 = one_bit_quantize(i0, v0, r0)[0].numpy()
    np.testing.assert_allclose(vals.numpy()[:len(q0)], q0, rtol=1e-6)
    dense = tf.scatter_nd(pos[:, None], vals, [ex.total]).numpy()
    np.testing.assert_allclose(dense + flat(new_res), flat(g), atol=1e-5)  # mass kept
    encoded = ex.encode(positions, values)
    assert int(encoded[2].shape[0]) == -(-int(tf.size(positions)) // 8)  # 1 bit per value


def test_drop_ratio_warm_up_ramps_linearly():
    got = [float(ramped_drop_ratio(tf.constant(s, tf.int64), 0.99, 100)) for s in (0, 49, 99, 500)]
    assert got == pytest.approx([0.0099, 0.495, 0.99, 0.99])
    assert float(ramped_drop_ratio(tf.constant(0, tf.int64), 0.99, 0)) == pytest.approx(0.99)


def test_geometric_drop_warm_up_shrinks_the_kept_fraction_by_a_constant_factor():
    def kept(step, shape):
        return 1.0 - float(ramped_drop_ratio(tf.constant(step, tf.int64), 0.99, 100, shape))

    geometric = [kept(s, "geometric") for s in range(100)]
    assert geometric[-1] == pytest.approx(0.01) and kept(500, "geometric") == pytest.approx(0.01)
    assert geometric[49] == pytest.approx(0.1, rel=1e-4)  # half-way: 0.01 ** 0.5
    factors = [b / a for a, b in zip(geometric, geometric[1:])]
    assert max(factors) == pytest.approx(min(factors), rel=1e-4) and max(factors) < 1
    linear = [kept(s, "linear") for s in range(100)]
    # what the warm-up sends in total: about a fifth of the gradient per step, against a half
    assert sum(geometric) / 100 == pytest.approx((1 - 0.01) / math.log(100), rel=0.05)
    assert sum(geometric) < 0.45 * sum(linear)
    with pytest.raises(ValueError, match="warm-up shape"):
        ramped_drop_ratio(tf.constant(0, tf.int64), 0.99, 100, "cosine")


def test_indexed_slices_gradients_are_densified():
    ex = GradDropExchange(make(drop_ratio=0.0), [(6, 2)], num_ranks=1)
    sl = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([4, 1]),
                          tf.constant([6, 2]))
    out = ex.exchange([sl], None, tf.constant(0, tf.int64))[0].numpy()
    np.testing.assert_array_equal(out, tf.convert_to_tensor(sl).numpy())


def test_local_gradients_with_two_ranks_match_the_numpy_reference():
    """N = 2, R = 0.9, non-zero residuals: rank 0 applies C = G - S/N + L/N with G the average
    of both ranks' sparse sends (the thesis's C = G - S + L, every term divided by N), S its own
    send and L its dense gradient without the residual. A missing /N is off by S/2 - L/2."""
    settings = make(local_gradients=True)
    sent1 = {}

    def record(tensor, name):  # rank 1 alone: remember what it handed to each allgather
        sent1[name] = tensor
        return tensor

    step = tf.constant(3, tf.int64)
    g, res_in = [grads(20), grads(21)], [grads(30), grads(31)]
    res = [[tf.Variable(r) for r in rank_res] for rank_res in res_in]
    GradDropExchange(settings, SHAPES, num_ranks=2, gather=record, seed=1).exchange(g[1], res[1], step)
    both = GradDropExchange(settings, SHAPES, num_ranks=2, seed=0,
                            gather=lambda t, name: tf.concat([t, sent1[name]], 0))
    update = flat(both.exchange(g[0], res[0], step)).astype(np.float64)
    # what each rank sent = (gradient + residual in) - residual out (mass is conserved exactly
    # in float32, the sum the op takes)
    s = [((flat(g[r]) + flat(res_in[r])) - flat([v.numpy() for v in res[r]])).astype(np.float64)
         for r in (0, 1)]
    assert 0 < np.count_nonzero(s[0]) < 0.2 * s[0].size
    reference = (s[0] + s[1]) / 2 - s[0] / 2 + flat(g[0]) / 2
    np.testing.assert_allclose(update, reference, rtol=0, atol=1e-5)
    assert np.abs(reference - ((s[0] + s[1]) / 2 - s[0] + flat(g[0]))).max() > 0.1


def test_sampling_seed_differs_for_every_rank_step_and_tensor():
    seeds = {int(sampling_seed(rank, step)) + tensor
             for rank in range(3) for step in (0, 1, 2, 10**6) for tensor in range(5)}
    assert len(seeds) == 3 * 4 * 5
    assert int(sampling_seed(1, tf.constant(7, tf.int64))) == int(sampling_seed(1, 7))


def test_sampled_threshold_moves_with_the_step_and_repeats_for_the_same_rank_and_step():
    """Above exact_below (65536 entries) the threshold comes from a seeded sample: step 0 and
    step 1 keep different sets from the same gradient; the same (rank, step) keeps the same."""
    shapes = [(300, 300)]
    g = [tf.constant(np.random.default_rng(0).normal(size=shapes[0]).astype(np.float32))]
    r = [tf.zeros(shapes[0])]

    def kept(rank, step):
        ex = GradDropExchange(make(drop_ratio=0.999), shapes, num_ranks=1, seed=rank)
        return ex.drop(g, r, tf.constant(0.999), tf.constant(step, tf.int64))[0].numpy()

    first = kept(0, 5)
    np.testing.assert_array_equal(kept(0, 5), first)
    assert not np.array_equal(kept(0, 6), first)
    assert not np.array_equal(kept(1, 5), first)


def test_dense_fallback_threshold_is_where_the_byte_model_crosses():
    """Below the returned drop ratio the allgathered (position, value) pairs cost each rank more
    link bytes than a ring allreduce of the dense float32 gradient; above it, fewer."""
    total = 1_000_000
    assert dense_fallback_below(total, 1) == 0.0  # one rank: nothing to choose
    assert dense_fallback_below(total, 2) == pytest.approx(1 / 3, abs=1e-3)  # 6 B/entry vs 2 x 4 B / 2
    assert dense_fallback_below(total, 4) == pytest.approx(2 / 3, abs=1e-3)
    assert dense_fallback_below(total, 2, one_bit=True, columns=1000) == 0.0  # 2.125 B/entry: never
    for ranks, one_bit in ((2, False), (4, False), (8, False), (8, True)):
        below = dense_fallback_below(total, ranks, one_bit, columns=1000)
        dense = accounting.link_send_bytes("dense", 4 * total, ranks)

        def sparse(ratio, ranks=ranks, one_bit=one_bit):
            payload = sparse_payload_bytes((1 - ratio) * total, total, one_bit, columns=1000)
            return accounting.link_send_bytes("graddrop", payload, ranks)
        assert 0.0 < below < 1.0
        assert sparse(below - 0.01) > dense > sparse(below + 0.01)


@pytest.mark.parametrize("local_gradients", [False, True])
def test_dense_fallback_applies_what_the_allgather_would(local_gradients):
    """Two simulated ranks early in the drop warm-up (R = 0.099, under the 2-rank threshold of
    about 1/3): allreducing the kept entries as a dense tensor gives rank 0 the same update and
    residuals as allgathering them, sends the dense bytes, and says so in its statistics; after
    the warm-up the same exchange allgathers."""
    settings = make(drop_ratio=0.99, drop_warmup_steps=100, local_gradients=local_gradients)
    step = tf.constant(9, tf.int64)  # linear ramp: R = 0.99 * 10 / 100
    g, res_in = [grads(40), grads(41)], [grads(50), grads(51)]
    out = {}
    for fallback in (True, False):
        sent1 = {}

        def record(tensor, name, sent1=sent1):  # rank 1 alone: what it handed to each collective
            sent1[name] = tensor
            return tensor

        res = [[tf.Variable(r) for r in rank_res] for rank_res in res_in]
        GradDropExchange(settings, SHAPES, 2, gather=record, reduce=record, seed=1,
                         dense_fallback=fallback).exchange(g[1], res[1], step)
        ex = GradDropExchange(settings, SHAPES, 2, seed=0, dense_fallback=fallback,
                              gather=lambda t, name, sent1=sent1: tf.concat([t, sent1[name]], 0),
                              reduce=lambda t, name, sent1=sent1: t + sent1[name])
        update = flat(ex.exchange(g[0], res[0], step))
        out[fallback] = (update, flat([v.numpy() for v in res[0]]), ex.step_stats(), ex, res[0])
        assert ("graddrop_dense" in sent1) == fallback
    assert 0 < out[True][3].dense_below < 0.34 and out[False][3].dense_below == 0.0
    np.testing.assert_allclose(out[True][0], out[False][0], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(out[True][1], out[False][1])
    assert np.abs(out[True][0]).max() > 0.1
    on, off = out[True][2], out[False][2]
    assert on["dense_fallback"] and not off["dense_fallback"]
    assert on["kept"] == off["kept"] > 0.85 * out[True][3].total
    assert on["sent_bytes"] == on["dense_bytes"] < off["sent_bytes"]
    ex_on = out[True][3]
    ex_on.reduce = ex_on.gather = lambda t, name: t  # rank 0 alone now: only the branch matters
    ex_on.exchange(g[0], out[True][4], tf.constant(200, tf.int64))  # R = 0.99: allgather
    assert not ex_on.step_stats()["dense_fallback"]


@pytest.mark.parametrize("one_bit", [False, True])
def test_the_allgathers_are_of_one_dtype_so_horovod_fuses_them(one_bit):
    """Horovod fuses allgathers of one dtype only: the codes (uint16 positions, int32 counts,
    float32 values; sign bits and float32 means with one_bit) go out as bytes, one collective
    per step, and come back exactly (the update equals the codes decoded without the bytes)."""
    handed = []

    def record(tensor, name):
        handed.append((name, tensor.dtype))
        return tensor

    settings = make(one_bit=one_bit)
    ex = GradDropExchange(settings, SHAPES, num_ranks=1, gather=record)
    update = flat(ex.exchange(grads(1), None, tf.constant(5, tf.int64)))
    assert len(handed) == (5 if one_bit else 3)
    assert {dtype for _, dtype in handed} == {tf.uint8}, handed
    ref = GradDropExchange(settings, SHAPES, num_ranks=1)
    positions, values, _ = ref.drop(grads(1), [tf.zeros(s) for s in SHAPES], tf.constant(0.9),
                                    tf.constant(5, tf.int64))
    pos, vals = ref.decode(ref.encode(positions, values))
    np.testing.assert_array_equal(update, tf.scatter_nd(pos[:, None], vals, [ref.total]).numpy())
    assert 0 < np.count_nonzero(update) < 0.2 * update.size
