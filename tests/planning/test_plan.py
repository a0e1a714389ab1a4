"""tf-nmt plan: the alpha-beta model against cases computed by hand, argument errors, and a tiny
end-to-end plan with a tiny probe."""
from __future__ import annotations

import json

import pytest

from tf_nmt import cli
from tf_nmt.commands import plan as plan_cmd
from tf_nmt.commands.plan import parse_nodes, plan
from tf_nmt.errors import UsageError
from tf_nmt.planning import model as pm
from tf_nmt.planning.network import network

TINY = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64",
        "data.vocab_size=500", "data.batch_tokens=256"]


def test_one_ring_allreduce_by_hand():
    # 100 MB over 4 ranks on 1 Gbit/s (125e6 B/s), alpha 50 us:
    # 2 * 3/4 * 1e8 / 1.25e8 = 1.2 s, plus 2 * 3 * 50e-6 = 0.0003 s.
    net = network("1gbit")
    assert net.bandwidth_Bps == 125e6 and net.alpha_s == pytest.approx(50e-6)
    assert pm.ring_allreduce_s(1e8, 4, net) == pytest.approx(1.2003)
    # the same through the step model: one fused buffer (1e8 < 128 MiB) plus the half cycle of
    # tf-nmt's 10 ms a request waits on average
    step = pm.StepBytes(allreduce=1e8)
    assert pm.exchange_s(step, 4, 1, net) == pytest.approx(1.2053)
    assert pm.exchange_s(step, 4, 1, net, pm.Horovod(cycle_wait=1.0)) == pytest.approx(1.2103)
    assert pm.link_bytes(step, 4, 1) == pytest.approx(1.5e8)


def test_allgather_fusion_and_hierarchy_by_hand():
    net = network("custom", alpha_us=10, bandwidth_gbit=8)  # 1e9 B/s
    # 8 ranks with 1e6-byte slices: 7/8 * 8e6 / 1e9 + 7 * 1e-5 = 0.00707 s
    assert pm.ring_allgather_s(8e6, 8, net) == pytest.approx(0.00707)
    # 3 fused buffers of 100 MiB each, 2 ranks: 3 * (1/2 * 2 * 100 MiB / 1e9 + 2e-5 + cycle)
    hvd = pm.Horovod(fusion_bytes=100 * 2 ** 20, cycle_s=0.0)
    size = 300 * 2 ** 20
    assert pm.exchange_s(pm.StepBytes(allreduce=size), 2, 1, net, hvd) == pytest.approx(
        3 * (100 * 2 ** 20 / 1e9 + 2e-5))
    # 2 nodes x 4 ranks: within the node over the intra-node link, then across the 2 nodes
    intra = network("custom", alpha_us=1, bandwidth_gbit=400)
    expect = (2 * 3 / 4 * 1e8 / 50e9 + 6e-6) + (1e8 / 1e9 + 2e-5)
    assert pm.allreduce_s(1e8, 2, 4, net, intra) == pytest.approx(expect)


def test_cpu_terms_by_hand():
    net = network("custom", alpha_us=0, bandwidth_gbit=8)  # 1e9 B/s, no latency
    hvd = pm.Horovod(cycle_s=0.0)
    cpu = pm.Cpu(gamma_s_per_byte=1e-9, copy_s_per_byte=1e-10, graddrop_s_per_entry=1e-8)
    # allreduce of 1e8 bytes on 4 ranks: wire 2 * 3/4 * 0.1 s = 0.15 s; reduction
    # 3/4 * 1e8 * 1e-9 = 0.075 s; two fusion copies 2 * 1e8 * 1e-10 = 0.02 s
    step = pm.StepBytes(allreduce=1e8)
    assert pm.exchange_s(step, 4, 1, net, hvd, cpu) == pytest.approx(0.245)
    # 4 ranks on one node of 2 cores: the CPU work takes twice as long, 2 * 0.095 s, beside the
    # intra-node ring (400 Gbit/s, 1 us): 2 * 3/4 * 1e8 / 5e10 + 6e-6 = 0.003006 s
    shared = pm.Cpu(1e-9, 1e-10, 1e-8, cores_per_node=2)
    assert pm.exchange_s(step, 1, 4, net, hvd, shared) == pytest.approx(0.193006)
    # as many cores as ranks: no slow-down; more ranks than cores on emulated hosts
    assert pm.Cpu(cores_per_node=8).sharing(4) == 1.0 and pm.Cpu(cores_per_node=2).sharing(3) == 1.5
    assert pm.Cpu().sharing(64) == 1.0  # cores not given: at least a core per rank
    # graddrop: 1e6 entries at 1e-8 s = 0.01 s, plus the allgather of 4 slices of 1e5 bytes
    # (3/4 * 4e5 / 1e9 = 0.0003 s), on 3 ranks sharing 2 cores: 1.5 * 0.01
    gd = pm.StepBytes(allgather_slice=1e5, slice_follows_batch=False, graddrop_entries=1e6)
    assert pm.exchange_s(gd, 4, 1, net, hvd, cpu) == pytest.approx(0.0103)
    assert pm.exchange_s(gd, 4, 1, net, hvd, shared, sharing_ranks=3) == pytest.approx(0.0153)
    # a node that runs only 1.2 ranks' GradDrop exchanges at once at full speed (they share its
    # memory bandwidth): 3 ranks take 3 / 1.2 times as long; the allreduce's terms keep the cores
    narrow = pm.Cpu(1e-9, 1e-10, 1e-8, cores_per_node=2, graddrop_parallel=1.2)
    assert pm.exchange_s(gd, 4, 1, net, hvd, narrow, sharing_ranks=3) == pytest.approx(0.0253)
    assert pm.exchange_s(gd, 4, 1, net, hvd, narrow, sharing_ranks=1) == pytest.approx(0.0103)
    assert pm.exchange_s(step, 1, 4, net, hvd, narrow) == pytest.approx(0.193006)
    with pytest.raises(UsageError, match="needs --cores-per-node"):
        pm.Cpu(graddrop_parallel=1.0)
    for bad in (dict(gamma_s_per_byte=-1.0), dict(cores_per_node=0),
                dict(cores_per_node=2, graddrop_parallel=0.0)):
        with pytest.raises(UsageError):
            pm.Cpu(**bad)
    with pytest.raises(UsageError):
        pm.Horovod(cycle_wait=2.0)


def test_overlap_hides_exchange_up_to_the_backward_pass():
    assert pm.step_s(0.3, 0.1, overlap=1.0) == pytest.approx(0.3)  # 0.1 < 2/3 * 0.3
    assert pm.step_s(0.3, 0.5, overlap=1.0) == pytest.approx(0.6)
    assert pm.step_s(0.3, 0.1, overlap=0.0) == pytest.approx(0.4)


def test_node_lists():
    assert parse_nodes("1,2,4,...,256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_nodes("2,5,...,11") == [2, 5, 8, 11]  # arithmetic when not a multiple
    assert parse_nodes("3,5") == [3, 5]
    for bad in ("1,2,4,...,100", "0,1", "4,2", "1,...,8", "a", "1,2,4,..."):
        with pytest.raises(UsageError):
            parse_nodes(bad)


@pytest.mark.parametrize("argv, message", [
    (["plan", "--preset", "transformer-base"], "needs --nodes"),
    (["plan", "--preset", "transformer-base", "--nodes", "1,x"], "not a positive integer"),
    (["plan", "--nodes", "1,2", "--network", "2gbit"], "unknown network"),
    (["plan", "--nodes", "1,2", "--network", "custom", "--alpha-us", "3"], "needs both"),
    (["plan", "--nodes", "1,2", "--bandwidth-gbit", "0"], "must be > 0"),
    (["plan", "--nodes", "1,2", "--overlap", "1.5"], "--overlap"),
    (["plan", "--nodes", "1,2", "--compute-factor", "0"], "--compute-factor"),
    (["plan", "--probe", "--nodes", "1,2"], "would be ignored"),
    (["plan", "--probe", "--steps", "10"], "would be ignored"),
    (["plan", "--nodes", "1,2", "--compute-seconds", "1", "--probe-file", "x.json"], "not both"),
    (["plan", "--nodes", "1,2", "--cores-per-node", "0"], "--cores-per-node must be >= 1"),
    (["plan", "--nodes", "1,2", "--gamma-ns", "-1"], "--gamma-ns must be >= 0"),
    (["plan", "--probe", "--cores-per-node", "8"], "--cores-per-node would be ignored"),
    (["plan", "--probe", "--graddrop-ns", "3"], "--graddrop-ns would be ignored"),
    (["plan", "--probe", "--graddrop-parallel", "1"], "--graddrop-parallel would be ignored"),
    (["plan", "--nodes", "1,2", "--graddrop-parallel", "1"], "needs --cores-per-node"),
    (["plan", "--nodes", "1,2", "--cores-per-node", "2", "--graddrop-parallel", "0"],
     "--graddrop-parallel must be > 0"),
])
def test_bad_arguments_are_one_line_errors(argv, message, capsys, tmp_path):
    argv = [*argv, "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_a_non_empty_out_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    argv = ["plan", "--set", TINY[0], "--nodes", "1,2", "--compute-seconds", "1",
            "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_tiny_end_to_end_plan_and_probe_file(tmp_path):
    probe = plan("quickstart", TINY, [], out=tmp_path / "probe", probe_only=True, probe_steps=2,
                 quiet=True)
    assert probe["step_s"] > 0
    result = plan("quickstart", TINY, [1, 2, 4], ranks_per_node=2, network="1gbit",
                  out=tmp_path / "plan", probe_file=tmp_path / "probe" / "probe.json",
                  compute_factor=2.0, steps=100, quiet=True)
    written = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert written["rows"] == json.loads(json.dumps(result["rows"]))
    assert (tmp_path / "plan" / "plan.png").read_bytes()[:4] == b"\x89PNG"
    rows = result["rows"]
    assert rows[0]["compute_s"] == pytest.approx(probe["step_s"] / 2)
    grads = result["gradients"]
    assert result["step_bytes"]["allreduce"] == grads["embedding_bytes"] + grads["rest_bytes"]
    assert grads["parameters"] * 4 == grads["embedding_bytes"] + grads["rest_bytes"]
    net = network("1gbit")
    # the probe's CPU constants, a core per rank (no --cores-per-node)
    assert set(probe["cpu"]) >= set(plan_cmd.CPU_FLAGS.values())
    cpu = pm.Cpu(**{k: probe["cpu"][k] for k in plan_cmd.CPU_FLAGS.values()})
    assert result["cpu"]["source"].startswith("probe file")
    step = pm.StepBytes(allreduce=grads["parameters"] * 4)
    for row in rows:
        expect = pm.exchange_s(step, row["nodes"], 2, net, cpu=cpu)
        assert row["exchange_s"] == pytest.approx(expect)
        assert row["exchange_s"] > pm.exchange_s(step, row["nodes"], 2, net)  # CPU work counts
    # 2 ranks on 1 core, the add given by hand: the CPU work takes twice as long
    shared = plan("quickstart", TINY, [2], ranks_per_node=2, network="1gbit",
                  out=tmp_path / "shared", probe_file=tmp_path / "probe" / "probe.json",
                  cores_per_node=1, cpu_ns={"gamma": 1.0, "copy": None, "graddrop": None},
                  quiet=True)
    cpu = pm.Cpu(1e-9, cpu.copy_s_per_byte, cpu.graddrop_s_per_entry, cores_per_node=1)
    assert shared["rows"][0]["exchange_s"] == pytest.approx(pm.exchange_s(step, 2, 2, net, cpu=cpu))
    assert shared["cpu"]["source"].endswith("--gamma-ns")
    alone = pm.exchange_s(step, 2, 2, net, cpu=pm.Cpu(**{**cpu.to_dict(), "cores_per_node": 2}))
    assert alone < shared["rows"][0]["exchange_s"]
    for row in rows:
        assert row["step_s"] >= row["compute_s"]
        assert row["time_to_steps_s"] == pytest.approx(100 * row["step_s"])
    assert rows[0]["weak_efficiency"] == pytest.approx(1.0)
    # a probe of another model is refused
    with pytest.raises(UsageError, match="probed"):
        plan("quickstart", [*TINY, "model.ff_dim=128"], [1, 2], out=tmp_path / "other",
             probe_file=tmp_path / "probe" / "probe.json", quiet=True)


def test_graddrop_and_periodic_modes_count_their_bytes(tmp_path):
    sets = [*TINY, "train.comm=graddrop", "train.drop_ratio=0.99"]
    result = plan("quickstart", sets, [1, 2], out=tmp_path / "g", compute_seconds=1.0,
                  quiet=True)
    total = result["gradients"]["parameters"]
    # the wire code graddrop sends: a 2-byte position and a float32 per kept entry, and an int32
    # count per block of 65,536 positions
    blocks = -(-total // 65536)
    assert result["step_bytes"]["allgather_slice"] == pytest.approx(0.01 * total * 6 + 4 * blocks)
    result = plan("quickstart", [*TINY, "train.comm=fedavg", "train.average_every=10"], [1, 2],
                  out=tmp_path / "f", compute_seconds=1.0, quiet=True)
    assert result["step_bytes"]["periodic"] == total * 4 and result["step_bytes"]["period"] == 10


def test_strong_scaling_shrinks_batch_slices_but_not_graddrop_pairs():
    net, hvd = network("10gbit"), pm.Horovod(overlap=0.0)  # nothing hidden: bytes show
    follows = pm.StepBytes(allgather_slice=4e6)
    fixed = pm.StepBytes(allgather_slice=4e6, slice_follows_batch=False)
    rows = pm.table([1, 4], 1, 1.0, 1000, follows, follows, net, hvd)
    kept = pm.table([1, 4], 1, 1.0, 1000, fixed, fixed, net, hvd)
    # a quarter of the batch per rank: a quarter of the compute; its slices 1e6 (graddrop: 4e6)
    quarter = pm.exchange_s(pm.StepBytes(allgather_slice=1e6), 4, 1, net, hvd)
    assert rows[1]["strong_step_s"] == pytest.approx(pm.step_s(0.25, quarter, 0.0))
    assert kept[1]["strong_step_s"] == pytest.approx(
        pm.step_s(0.25, pm.exchange_s(fixed, 4, 1, net, hvd), 0.0))


def test_dense_mode_allgathers_only_sparse_gradients():
    # tied embedding (the default): also the output projection, so its gradient is dense and
    # dense mode allreduces everything, as sparse_as_dense does (the cluster study measures it)
    from tf_nmt.commands.train import build_config
    from tf_nmt.planning.probe import count_gradients, step_bytes
    from tf_nmt.training.trainer import build_model_for_training

    def counted(*sets):
        cfg = build_config("quickstart", None, [*TINY, "train.comm=dense", *sets])
        grads = count_gradients(build_model_for_training(cfg, 500, policy="float32"), 500)
        return grads, step_bytes(cfg, grads, 256)

    grads, tied = counted()
    assert grads.embedding_bytes == 0 and tied.allgather_slice == 0
    assert tied.allreduce == grads.parameters * 4
    grads, untied = counted("model.tie_embeddings=false")
    assert grads.embedding_bytes == 500 * 32 * 4 and grads.embedding_width == 32
    # a row per source and target token: 32 float32 values and an int64 index each
    assert untied.allgather_slice == 2 * 256 * (32 * 4 + 8)
    assert untied.allreduce == grads.rest_bytes


def test_the_compute_probe_does_no_exchange_work(tmp_path, monkeypatch):
    """graddrop selects and encodes on one process too; the probe's step must not, since the
    model adds that work to the exchange (it would be counted twice)."""
    from tf_nmt.config import load_config
    from tf_nmt.distributed.comm.optimizer import exchange_of
    from tf_nmt.planning.probe import random_batch
    from tf_nmt.training import trainer

    cfg = load_config(overrides=[*TINY, "train.comm=graddrop", "train.drop_warmup_steps=0"])
    x, y = random_batch(cfg, 8)
    built = {}
    for exchange in (True, False):
        model = trainer.build_and_compile(cfg, 500, exchange=exchange)
        model.train_on_batch(x, y)
        built[exchange] = exchange_of(model.optimizer)
    assert built[True] is not None and built[False] is None
    probed = []
    real = trainer.build_and_compile

    def watched(*args, **kwargs):
        model = real(*args, **kwargs)
        probed.append(model)
        return model

    monkeypatch.setattr(trainer, "build_and_compile", watched)
    plan("quickstart", [*TINY, "train.comm=graddrop", "train.drop_warmup_steps=0"], [],
         out=tmp_path / "probe", probe_only=True, probe_steps=1, quiet=True)
    assert probed and all(exchange_of(m.optimizer) is None for m in probed)
