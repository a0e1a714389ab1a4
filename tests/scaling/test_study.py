"""Scaling-study orchestration: spec validation, commands, outputs, and one real emulated sweep."""
import json

import pytest

from experiments.lib.launcher import worker_env
from experiments.scaling.cluster.emulated_ranks import launch_emulated
from experiments.scaling.cluster.modes import available_modes, mode_overrides
from experiments.scaling.cluster.netns import EmulatedCluster, LinkSpec, list_namespaces, support_problem
from experiments.scaling.cluster.plots import plot_study
from experiments.scaling.cluster.study import StudySpec, launch_command, run_study, worker_command, write_json_new
from tests.parallel.launch import horovod_importable

TINY = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64",
        "train.mixed_precision=false"]


@pytest.mark.parametrize("kwargs, match", [
    ({"workers": [0, 2]}, ">= 1"),
    ({"workers": [1, 3], "strong_sentences": 64}, "divisible"),
    ({"launcher": "cluster"}, "hostfile"),
    ({"launcher": "ssh"}, "launcher"),
    ({"kinds": ["sideways"]}, "scaling kind"),
    ({"comms": ["carrier-pigeon"]}, "not available"),
])
def test_spec_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StudySpec(**kwargs).validate()


def test_modes_are_config_overrides():
    assert available_modes() == ["dense", "sparse_as_dense", "graddrop"]
    for mode in available_modes():
        overrides = mode_overrides(mode)
        assert overrides and all("=" in o for o in overrides)


def test_worker_and_launch_commands(tmp_path):
    spec = StudySpec(launcher="cluster", hostfile="hosts.txt", overrides=["model.d_model=32"])
    cmd = worker_command(spec, "dense", 16, tmp_path / "o.json")
    assert cmd[1:3] == ["-m", "experiments.scaling.cluster.worker"]
    assert cmd[cmd.index("--batch-sentences") + 1] == "16"
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]
    assert sets[0] == "model.d_model=32" and set(mode_overrides("dense")) <= set(sets)
    full = launch_command(spec, 8, cmd)
    assert full[1:5] == ["-np", "8", "--hostfile", "hosts.txt"] and full[-len(cmd):] == cmd
    spec_mpi = StudySpec(launcher="cluster", hosts="a:4,b:4", controller="mpi")
    assert launch_command(spec_mpi, 8, cmd)[:3] == ["mpirun", "-np", "8"]
    assert launch_command(StudySpec(), 1, cmd) == cmd                  # local N=1: no launcher


def test_json_is_never_silently_overwritten(tmp_path):
    path = tmp_path / "s.json"
    write_json_new(path, {"a": 1})
    with pytest.raises(FileExistsError):
        write_json_new(path, {"a": 2})
    write_json_new(path, {"a": 3}, overwrite=True)
    assert json.loads(path.read_text()) == {"a": 3}


def test_plots_are_written(tmp_path):
    rows = [{"link": "1gbit", "comm": c, "kind": k, "workers": n, "efficiency": e,
             "compute_s": 0.1, "comm_s": 0.05 * (n - 1)}
            for c in ("dense", "graddrop") for k in ("weak", "strong")
            for n, e in ((1, 1.0), (2, 0.8))]
    paths = plot_study(rows, tmp_path, "test")
    assert [p.name for p in paths] == ["scaling_efficiency.png", "scaling_step_split.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_study_sweeps_every_combination(monkeypatch, tmp_path):
    """Orchestration with the measurement replaced: strong runs split the global batch, every
    (link, comm, kind, N) is measured once, rows come out relative to N=1."""
    from experiments.scaling.cluster import study

    seen = []

    def fake_measure(spec, link, n, command, out, log_dir):
        per_worker = int(command[command.index("--batch-sentences") + 1])
        seen.append((link, n, per_worker))
        tokens = per_worker * spec.tgt_len * n
        step = 0.1 * per_worker / 16 * (1 + 0.25 * (n - 1))   # compute ~ batch, comm grows with N
        return {"world": n, "tokens_per_s": tokens / step, "step_s": step, "compute_s": 0.08,
                "comm_s": step - 0.08, "global_tokens_per_step": tokens}

    monkeypatch.setattr(study, "_measure", fake_measure)
    spec = StudySpec(workers=[1, 2, 4], kinds=["weak", "strong"], comms=["dense"],
                     launcher="emulated", links=["100mbit", "10gbit"], weak_sentences=16,
                     strong_sentences=64)
    doc = run_study(spec, tmp_path, log=lambda _: None)
    assert len(doc["runs"]) == 2 * 2 * 3
    assert ("100mbit", 4, 16) in seen and ("10gbit", 4, 16) in seen      # strong: 64 / 4
    weak4 = [r for r in doc["rows"] if r["kind"] == "weak" and r["workers"] == 4][0]
    assert weak4["efficiency"] == pytest.approx(1 / 1.75)                # step grew 1.75x
    strong4 = [r for r in doc["rows"] if r["kind"] == "strong" and r["workers"] == 4][0]
    assert strong4["speedup"] == pytest.approx(0.4 / 0.175)             # 0.4 s -> 0.175 s
    assert "| 100mbit | weak | dense | 4 |" in doc["table_markdown"]


@pytest.mark.slow
@pytest.mark.parallel
@pytest.mark.skipif(support_problem() is not None, reason=f"network namespaces: {support_problem()}")
@pytest.mark.skipif(not horovod_importable(), reason="Horovod is not installed")
@pytest.mark.parametrize("comm", ["dense", "graddrop"])
def test_worker_on_two_emulated_hosts(tmp_path, comm):
    """The step benchmark as 2 Gloo ranks in 2 namespaces (a tiny Transformer): it reports
    positive times for 2 x 32 target tokens per step, its gradient exchange went through the
    shaped links, and the bytes it counted during its distributed steps are the payload the
    accounting predicts plus headers and control messages."""

    spec = StudySpec(comms=[comm], src_len=8, tgt_len=8, vocab_size=500, overrides=TINY,
                     steps=4, warmup=1, block=2, launcher="emulated", exchange_steps=2)
    out = tmp_path / "w.json"
    with EmulatedCluster(2, LinkSpec("1gbit"), tag="tworker") as cluster:
        before = cluster.link_bytes()
        launch_emulated(cluster, worker_command(spec, comm, 4, out), tmp_path / "logs",
                        env=worker_env(), timeout=300)
        after = cluster.link_bytes()
    result = json.loads(out.read_text())
    assert result["world"] == 2 and result["global_tokens_per_step"] == 64
    assert result["step_s"] > 0 and result["compute_s"] > 0 and result["tokens_per_s"] > 0
    assert len(result["rank0_step_times_s"]) == 4
    # the exchange timed alone (after the counted steps): 2 updates of each kind, a real cost
    assert len(result["rank0_exchange_update_times_s"]) == len(result["rank0_local_update_times_s"]) == 2
    assert result["exchange_only_s"] > 0
    # each update after its barrier waited a share of Horovod's cycle (10 ms, tf-nmt's default)
    assert len(result["exchange_phase_offsets_s"]) == 2
    assert all(0 <= w < 0.010 for w in result["exchange_phase_offsets_s"])
    predicted, counted = result["predicted_link_bytes_per_step"], result["link_bytes_per_step"]
    whole_launch = min(after[h] - before[h] for h in after)
    if comm == "dense":
        # ~50k float32 parameters: each step's ring allreduce sends ~200 kB per host
        assert predicted == pytest.approx(result["num_parameters"] * 4)
    else:  # graddrop at R = 0.99 hands over 1% of the entries as (positions, values)
        assert predicted < 0.05 * result["num_parameters"] * 4
    assert predicted <= counted <= 1.25 * predicted + 20_000
    # the whole launch (broadcast, warm-up, barriers, exchange-free blocks) sent far more
    assert whole_launch > 4 * counted
    assert list_namespaces(cluster.prefix) == []


def test_phase_offsets_spread_over_the_cycle():
    # the waits after the exchange-alone barriers: the same on every rank (a function of the
    # call's index), inside one cycle, and spread over it (no gap wider than a fifth of it)
    from experiments.scaling.cluster.worker import phase_offsets

    waits = phase_offsets(16, 0.010)
    assert waits == phase_offsets(16, 0.010) and len(set(waits)) == 16
    edges = sorted([0.0, *waits, 0.010])
    assert all(0 <= w < 0.010 for w in waits)
    assert max(b - a for a, b in zip(edges, edges[1:])) < 0.002
    assert abs(sum(waits) / 16 - 0.005) < 0.0005  # half a cycle on average
    assert phase_offsets(4, 0.0) == [0.0] * 4


def test_sent_bytes_reads_the_interface_transmit_counter():
    from experiments.scaling.cluster.worker import sent_bytes

    table = ("Inter-|   Receive                            |  Transmit\n"
             " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
             "    lo:  1000      10    0    0    0     0          0         0     1000      10"
             "    0    0    0     0       0          0\n"
             "  eth0: 52000     400    0    0    0     0          0         0   987654     300"
             "    0    0    0     0       0          0\n")
    assert sent_bytes("eth0", table) == 987654 and sent_bytes("lo", table) == 1000
    with pytest.raises(ValueError, match="no interface 'eth1'"):
        sent_bytes("eth1", table)


def test_worker_counts_link_bytes_only_on_an_emulated_cluster(tmp_path):
    emulated = worker_command(StudySpec(launcher="emulated"), "dense", 4, tmp_path / "o.json")
    local = worker_command(StudySpec(), "dense", 4, tmp_path / "o.json")
    i = emulated.index("--link-iface")
    assert emulated[i + 1] == "eth0" and "--link-iface" not in local


def test_merge_studies_recomputes_rows_and_refuses_duplicates():
    from experiments.scaling.cluster.study import merge_studies

    def doc(link, tps2):
        runs = [{"link": link, "comm": "dense", "kind": "weak", "world": n, "tokens_per_s": t,
                 "step_s": 1.0, "compute_s": 0.5, "comm_s": 0.5} for n, t in ((1, 100.0), (2, tps2))]
        return {"spec": {"links": [link]}, "runs": runs}

    merged = merge_studies([doc("100mbit", 120.0), doc("10gbit", 180.0)])
    eff = {(r["link"], r["workers"]): r["efficiency"] for r in merged["rows"]}
    assert eff[("100mbit", 2)] == pytest.approx(0.6) and eff[("10gbit", 2)] == pytest.approx(0.9)
    assert len(merged["specs"]) == 2
    with pytest.raises(ValueError, match="more than one study"):
        merge_studies([doc("100mbit", 120.0), doc("100mbit", 130.0)])


def test_no_rows_no_plots(tmp_path):
    assert plot_study([], tmp_path, "empty") == []
    assert list(tmp_path.iterdir()) == []


def test_fixed_gradient_update_applies_exactly_the_given_gradients():
    """The worker's exchange-alone update: its linear loss hands the optimizer exactly the
    fixed gradients, an embedding's rows staying IndexedSlices, through the call train_step
    makes on this Keras version (plain SGD at rate 1: variable -= gradient)."""
    import numpy as np

    from experiments.scaling.cluster.worker import batch_gradients, fixed_gradient_update
    from tf_nmt.compat import KERAS3, keras, tf

    ids = keras.Input((3,), dtype="int32")
    model = keras.Model(ids, keras.layers.Dense(5)(keras.layers.Embedding(7, 4)(ids)))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), loss="mse")
    x = tf.constant([[1, 2, 2], [5, 1, 0]])
    y = tf.constant([[0, 4, 1], [2, 2, 3]])
    grads = batch_gradients(tf, model, x, y)
    assert isinstance(grads[0], tf.IndexedSlices) and not isinstance(grads[1], tf.IndexedSlices)
    before = [v.numpy() for v in model.trainable_variables]
    fixed_gradient_update(tf, model, grads, KERAS3)()
    for old, v, g in zip(before, model.trainable_variables, grads):
        dense = tf.convert_to_tensor(g).numpy()
        np.testing.assert_allclose(v.numpy(), old - dense, rtol=1e-6, atol=1e-7)
