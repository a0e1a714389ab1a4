"""The machine record of results files (tf_nmt.utils.machine), read from planted cpuinfo files."""
from __future__ import annotations

import json
import os

import pytest

from tf_nmt.utils import machine

AMX_CPU = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: another name that must not win
flags\t\t: fpu
"""
OLD_CPU = """processor : 0
cpu family : 6
model : 85
model name : Intel(R) Xeon(R) Gold 6148
flags : fpu sse2 avx2 avx512f avx512_vnni
"""


def test_describe_names_the_cpu_and_the_flags_that_change_speed(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(AMX_CPU)
    record = machine.describe(info)
    assert record["cpu"] == "Intel(R) Xeon(R) Processor (family 6, model 143)"
    assert record["isa"] == ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                             "amx_bf16", "amx_int8"]  # ISA_FLAGS order, not the file's
    assert record["cpus"] == os.cpu_count() and record["platform"]
    assert "loadavg_after" not in record and "loadavg_before" not in record
    json.dumps(record)  # it goes into results files

    info.write_text(OLD_CPU)
    assert machine.describe(info)["isa"] == ["avx2", "avx512f", "avx512_vnni"]
    assert machine.cpu_model(info) == "Intel(R) Xeon(R) Gold 6148 (family 6, model 85)"


def test_load_averages_are_recorded_only_when_asked(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(OLD_CPU)
    record = machine.describe(info, load=True, load_before=[0.5, 0.25, 0.1])
    assert record["loadavg_before"] == [0.5, 0.25, 0.1]
    assert len(record["loadavg_after"]) == 3


def test_a_missing_cpuinfo_gives_no_flags_and_a_platform_name(tmp_path):
    missing = tmp_path / "absent"
    assert machine.cpu_flags(missing) == frozenset()
    assert machine.cpu_fields(missing) == {}
    assert machine.describe(missing)["isa"] == []
    assert machine.cpu_model(missing)  # platform.processor() or platform.machine()


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="no /proc/cpuinfo (not Linux)")
def test_this_machine_agrees_with_proc_cpuinfo():
    first = open("/proc/cpuinfo").read().split("\n\n")[0]
    flags = next(line for line in first.splitlines() if line.startswith("flags")).split(":")[1].split()
    assert machine.cpu_flags() == frozenset(flags)


def _v2(root, proc, cpu_max, nested="/job/step"):
    """A planted cgroup v2 tree: ``cpu.max`` in the process's cgroup, none above it."""
    proc.write_text(f"0::{nested}\n")
    leaf = root.joinpath(*nested.strip("/").split("/"))
    leaf.mkdir(parents=True)
    (leaf / "cpu.max").write_text(cpu_max + "\n")
    (root / "cpu.max").write_text("max 100000\n")


@pytest.mark.parametrize("cpu_max, cores", [("max 100000", 8), ("200000 100000", 2),
                                             ("150000 100000", 2), ("50000 100000", 1),
                                             ("1600000 100000", 8)])
def test_usable_cores_honours_the_cgroup_v2_quota(tmp_path, monkeypatch, cpu_max, cores):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    _v2(tmp_path / "cg", tmp_path / "proc", cpu_max)
    assert machine.usable_cores(tmp_path / "cg", tmp_path / "proc") == cores


def test_a_parent_cgroups_quota_applies_to_its_children(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    _v2(tmp_path / "cg", tmp_path / "proc", "max 100000")
    (tmp_path / "cg" / "job" / "cpu.max").write_text("300000 100000\n")
    assert machine.cgroup_cpu_limit(tmp_path / "cg", tmp_path / "proc") == 3.0
    assert machine.usable_cores(tmp_path / "cg", tmp_path / "proc") == 3


@pytest.mark.parametrize("quota, cores", [("-1", 6), ("250000", 3), ("400000", 4)])
def test_usable_cores_honours_the_cgroup_v1_quota(tmp_path, monkeypatch, quota, cores):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)), raising=False)
    root, proc = tmp_path / "cg", tmp_path / "proc"
    proc.write_text("4:memory:/x\n2:cpu,cpuacct:/slurm/job1\n0::/\n")
    leaf = root / "cpu,cpuacct" / "slurm" / "job1"
    leaf.mkdir(parents=True)
    (leaf / "cpu.cfs_quota_us").write_text(quota + "\n")
    (leaf / "cpu.cfs_period_us").write_text("100000\n")
    assert machine.usable_cores(root, proc) == cores


def test_usable_cores_honours_the_affinity_mask(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    _v2(tmp_path / "cg", tmp_path / "proc", "800000 100000")
    assert machine.usable_cores(tmp_path / "cg", tmp_path / "proc") == 3  # the mask is tighter
    # No cgroup files at all (not Linux, or not mounted): the mask alone.
    assert machine.usable_cores(tmp_path / "absent", tmp_path / "absent-proc") == 3
