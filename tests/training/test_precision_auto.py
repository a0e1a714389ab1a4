"""``train.mixed_precision: auto`` decides for the CPU (issue 56 item 2): bfloat16 only where the
CPU computes it natively, said and recorded; an explicit ``true`` without it warns."""
import json

import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.config import PRESETS, ConfigError, load_config, preset
from tf_nmt.training import precision, runtime
from tf_nmt.training.trainer import train
from tf_nmt.utils.machine import cpu_flags

# The flags of the CPUs seen here (../shared/STACK.md), first processor's "flags" line, trimmed.
ZEN3 = frozenset("fpu sse2 avx avx2 fma bmi2".split())                     # EPYC Zen 3: AVX2 only
ZEN4 = frozenset("avx2 avx512f avx512_vnni avx512_bf16".split())           # EPYC Zen 4
SKYLAKE = frozenset("avx2 avx512f avx512cd avx512bw avx512vl".split())    # Xeon Gold 6148
SAPPHIRE = frozenset("avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8".split())  # Xeon, AMX


@pytest.mark.parametrize("flags,mixed", [(ZEN3, False), (SKYLAKE, False), (ZEN4, True),
                                         (SAPPHIRE, True), (frozenset(), False)])
def test_auto_takes_bfloat16_only_where_the_cpu_computes_it(flags, mixed):
    decision = precision.decide("auto", capabilities=[], flags=flags)
    assert decision.mixed is mixed and decision.warning is None
    assert decision.reason.startswith("auto: ")
    assert ("natively" in decision.reason) is mixed
    assert precision.policy_for_device("auto", [], flags) == ("mixed_bfloat16" if mixed else "float32")


def test_auto_on_a_gpu_is_mixed_by_its_capability():
    assert precision.decide("auto", capabilities=[(9, 0)], flags=ZEN3).mixed
    assert precision.policy_for_device("auto", [(9, 0)], ZEN3) == "mixed_bfloat16"
    assert precision.policy_for_device("auto", [(7, 0)], ZEN3) == "mixed_float16"


def test_explicit_true_without_native_bf16_is_obeyed_with_a_warning():
    slow = precision.decide(True, capabilities=[], flags=ZEN3)
    assert slow.mixed and "no native bfloat16" in slow.warning
    assert precision.decide(True, capabilities=[], flags=SAPPHIRE).warning is None
    assert precision.decide(False, capabilities=[], flags=SAPPHIRE).mixed is False
    with pytest.raises(ValueError, match="true, false or auto"):
        precision.decide("fast", capabilities=[], flags=ZEN3)


def test_cpu_flags_come_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: " + " ".join(sorted(ZEN4)) + "\n\n"
                    "processor\t: 1\nflags\t\t: avx2\n")
    assert precision.native_bf16_flags(cpu_flags(info)) == ("avx512_bf16",)


def test_config_takes_auto_and_every_preset_uses_it():
    assert load_config(None, ["train.mixed_precision=auto"]).train.mixed_precision == "auto"
    for name in PRESETS:
        assert PRESETS[name]["train"]["mixed_precision"] == "auto", name
    # an explicit value over a preset's auto is a bool again, not the string "true"
    base = preset("transformer-base")
    assert base.train.mixed_precision == "auto"
    assert load_config(None, ["train.mixed_precision=true"], base=base).train.mixed_precision is True
    with pytest.raises(ConfigError, match="train.mixed_precision: unknown precision 'fast'"):
        load_config(None, ["train.mixed_precision=fast"])


@pytest.mark.parametrize("flags,policy", [(ZEN3, "float32"), (SAPPHIRE, "mixed_bfloat16")])
def test_a_run_on_auto_says_and_records_the_decision(flags, policy, tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "gpu_compute_capabilities", lambda devices=None: [])
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    lines = []
    run = tmp_path / "run"
    train(tiny_config(write_toy_data_dir(tmp_path / "data"), "train.train_steps=3",
                      "train.steps_per_cycle=3", "train.mixed_precision=auto"), run, log=lines.append)
    record = json.loads((run / "meta.json").read_text())["runtime"]["precision"]
    assert record["policy"] == policy and record["asked"] == "train.mixed_precision=auto"
    assert record["reason"].startswith("auto: ") and "warning" not in record
    said = [line for line in lines if line.startswith("precision:")]
    assert len(said) == 1 and policy in said[0], lines


def test_explicit_true_on_a_cpu_without_bf16_says_one_warning_line(monkeypatch):
    monkeypatch.setattr(precision, "gpu_compute_capabilities", lambda devices=None: [])
    monkeypatch.setattr(precision, "cpu_flags", lambda: ZEN3)
    policy, record = runtime.choose_policy(True)
    assert policy == "mixed_bfloat16" and "no native bfloat16" in record["warning"]
    lines = runtime.fallback_lines({}, record)
    assert lines == [f"warning: {record['warning']}"]
    monkeypatch.setattr(precision, "cpu_flags", lambda: SAPPHIRE)
    assert runtime.fallback_lines({}, runtime.choose_policy(True)[1]) == []
