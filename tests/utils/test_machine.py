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
