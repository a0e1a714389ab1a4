"""A run resolves ``cfg.train`` once (``validate_config`` returns a ``TrainPlan``) and passes the
values down: the comm settings, the activation quantiser, the kernels, and the dtype policy,
which the quickstart's precision probe hands over as a value, not as a ``--set`` string."""
import pytest

from tests.helpers import write_toy_data_dir
from tf_nmt.config import load_config
from tf_nmt.distributed import comm
from tf_nmt.training import precision, trainer

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
        "model.ff_dim=64", "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
        "train.peak_lr=0.003", "train.warmup_steps=10", "train.log_every=5", "train.seed=7"]


def counting(monkeypatch, owner, name):
    """Replace ``owner.name`` by a wrapper that counts its calls; returns the count list."""
    calls = []
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_validate_config_returns_what_it_resolved():
    cfg = load_config(None, TINY + ["train.comm=graddrop", "train.drop_ratio=0.9",
                                    "train.quantize_activations_bits=4"])
    plan = trainer.validate_config(cfg)
    assert plan.comm == comm.resolve_comm(cfg.train)
    assert plan.activation_quantization.bits == 4
    assert {plan.loss_kernel, plan.dropout_kernel, plan.norm_kernel} <= {"fused", "tf"}


def test_build_and_compile_uses_the_plan_and_policy_it_is_given(monkeypatch):
    cfg = load_config(None, TINY)  # train.mixed_precision=false
    plan = trainer.validate_config(cfg)

    def again(*_args, **_kwargs):
        raise AssertionError("resolved again")

    monkeypatch.setattr(comm, "resolve_comm", again)
    monkeypatch.setattr(precision, "policy_for_device", again)
    monkeypatch.setattr(trainer, "validate_config", again)
    model = trainer.build_and_compile(cfg, 64, plan=plan, policy="mixed_bfloat16")
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert cfg.train.mixed_precision is False


def test_the_precision_probe_passes_the_policy_as_a_value(monkeypatch, tmp_path):
    from tf_nmt.compat import tf
    from tf_nmt.data.data_dir import ensure_vocab
    from tf_nmt.training import autotune

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}"])
    ensure_vocab(data, cfg.data.vocab_size, log=lambda _m: None)
    built = []

    class Model:
        def train_step(self, _batch):
            return {"loss": tf.constant(1.0)}

    def build(probe_cfg, _vocab_size, plan=None, policy=None):
        assert probe_cfg is cfg and plan is not None  # the same config, validated once
        built.append(policy)
        return Model()

    monkeypatch.setattr(autotune, "build_and_compile", build)
    resolved = counting(monkeypatch, comm, "resolve_comm")
    autotune.fastest_precision(cfg, batches=1, rounds=1, log=lambda _m: None)
    assert built == [precision.policy_for_device(False), precision.policy_for_device(True)]
    assert len(resolved) == 1 and cfg.train.mixed_precision is False


@pytest.mark.slow  # trains a tiny model for 5 steps
def test_a_run_resolves_its_settings_once(monkeypatch, tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "train.train_steps=5",
                                    "train.steps_per_cycle=5"])
    resolved = counting(monkeypatch, comm, "resolve_comm")
    policies = counting(monkeypatch, precision, "policy_for_device")
    result = trainer.train(cfg, tmp_path / "run", log=lambda _m: None)
    assert result.final_step == 5
    assert len(resolved) == 1 and len(policies) == 1
