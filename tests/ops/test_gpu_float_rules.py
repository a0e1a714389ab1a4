"""The CUDA kernels' CPU-arithmetic rules (custom_ops/cc/kernels/float16_gpu.h), checked on the host.

float16_gpu.h is host/device code: here it is compiled with the host compiler and its add/sub
(FtzAdd/FtzSub) are compared bit for bit with this CPU's own SSE add/sub for NaN, infinity, zero
and normal operands, in both operand orders. This is the rule that made the H100 replay of the
golden cases bit-exact (CUDA's canonical NaN differs from x86's); subnormals are left out because
a plain program runs without TF's DAZ/FTZ mode.
"""
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "custom_ops" / "cc" / "kernels"

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <xmmintrin.h>
#include "float16_gpu.h"
using namespace tf_nmt;
static uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static float hw(float a, float b, bool sub) {  // one SSE instruction, a as the first source
  __m128 x = _mm_set_ss(a), y = _mm_set_ss(b);
  return _mm_cvtss_f32(sub ? _mm_sub_ss(x, y) : _mm_add_ss(x, y));
}
int main() {
  const uint32_t raw[] = {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xff800001u, 0x7f800001u,
                          0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x3f800000u,
                          0xbfc00000u, 0x7f7fffffu, 0xff7fffffu, 0x40490fdbu};
  const int n = sizeof(raw) / sizeof(raw[0]);
  int bad = 0, checked = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int sub = 0; sub < 2; ++sub) {
        float a, b;
        std::memcpy(&a, &raw[i], 4);
        std::memcpy(&b, &raw[j], 4);
        const float want = hw(a, b, sub);
        const float got = sub ? FtzSub(a, b) : FtzAdd(a, b);
        ++checked;
        if (bits(got) != bits(want)) {
          ++bad;
          std::printf("%08x %c %08x: got %08x want %08x\n", raw[i], sub ? '-' : '+', raw[j],
                      bits(got), bits(want));
        }
      }
  std::printf("checked %d, bad %d\n", checked, bad);
  return bad != 0;
}
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 NaN rules")
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_host_add_sub_match_x86_bit_for_bit(tmp_path):
    src = tmp_path / "rules.cc"
    src.write_text(PROGRAM)
    exe = tmp_path / "rules"
    subprocess.run(["g++", "-std=c++17", "-O2", "-msse2", f"-I{KERNELS}", str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert "checked 392, bad 0" in run.stdout
