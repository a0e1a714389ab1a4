// bfloat16 <-> float, 16 lanes of AVX-512 or 8 of AVX2 at a time, with Eigen's rounding rules,
// for kernels that read and write bfloat16 tensors but compute in float; and which of the two
// instruction sets this CPU has (SimdIsa).
//
// Functions carry their own target attribute: the library is built for baseline x86-64 and a
// kernel calls them only after checking the CPU (__builtin_cpu_supports).
#ifndef TF_NMT_BF16_SIMD_H_
#define TF_NMT_BF16_SIMD_H_

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace tf_nmt {
// The widest loops a kernel may take, in order: a kernel with a loop for a level takes it when the
// CPU has it (CpuSimdIsa) and the caller's cap allows it (ChooseSimdIsa).
enum class SimdIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
}  // namespace tf_nmt

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#define TF_NMT_BF16_SIMD_AVAILABLE 1
// Widening and narrowing need AVX-512F only; the masked 16-bit loads and stores need BW and VL.
#define TF_NMT_AVX512F __attribute__((target("avx512f")))
#define TF_NMT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
// The 8-lane loops: AVX2 and FMA (Haswell and later Xeons, AMD Zen).
#define TF_NMT_AVX2 __attribute__((target("avx2,fma")))

namespace tf_nmt {

// What this CPU (and OS, which must save the ymm/zmm state) supports; detected once.
inline SimdIsa CpuSimdIsa() {
  static const SimdIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      return SimdIsa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdIsa::kAvx2;
    return SimdIsa::kScalar;
  }();
  return isa;
}

// 16 bfloat16 values (raw bits) widened to float: exact.
TF_NMT_AVX512F inline __m512 WidenBf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Eigen's float -> bfloat16 conversion, 16 lanes: round to nearest even on the bits; a NaN becomes
// the quiet NaN 0x7FC0 with its sign (0xFFC0), as Eigen's float_to_bfloat16_rtne does.
TF_NMT_AVX512F inline __m256i NarrowToBf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_and_si512(high, _mm512_set1_epi32(0x8000)),
                                            _mm512_set1_epi32(0x7FC0));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet_nan));
}

// The first `valid` lanes at p (float or bfloat16 bits) as float; the other lanes are 0.
TF_NMT_AVX512 inline __m512 LoadAsFloat(const float* p, __mmask16 valid) {
  return _mm512_maskz_loadu_ps(valid, p);
}
TF_NMT_AVX512 inline __m512 LoadAsFloat(const uint16_t* p, __mmask16 valid) {
  return WidenBf16(_mm256_maskz_loadu_epi16(valid, p));
}

// The first `valid` lanes of v stored at p (as float, or rounded to bfloat16 bits).
TF_NMT_AVX512 inline void StoreFromFloat(float* p, __m512 v, __mmask16 valid) {
  _mm512_mask_storeu_ps(p, valid, v);
}
TF_NMT_AVX512 inline void StoreFromFloat(uint16_t* p, __m512 v, __mmask16 valid) {
  _mm256_mask_storeu_epi16(p, valid, NarrowToBf16(v));
}

// ---- 8 lanes (AVX2) ----

// 8 bfloat16 values (raw bits) widened to float: exact.
TF_NMT_AVX2 inline __m256 WidenBf16x8(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// NarrowToBf16's rounding (nearest even, quiet NaN with its sign) on 8 lanes.
TF_NMT_AVX2 inline __m128i NarrowToBf16x8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_and_si256(high, _mm256_set1_epi32(0x8000)),
                                            _mm256_set1_epi32(0x7FC0));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, nan);
  // Every lane is in [0, 0xFFFF], so the signed-to-unsigned pack keeps it exactly.
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// Lanes [0, left) all ones, the others zero (left may exceed 8), as a float mask for blendv/and.
TF_NMT_AVX2 inline __m256 LaneMask8(int64_t left) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(left < 8 ? left : 8)), lanes));
}

TF_NMT_AVX2 inline float HorizontalMax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

TF_NMT_AVX2 inline float HorizontalSum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The first `valid` (at most 8) values at p as float; the other lanes are 0. A short tail goes
// through a zeroed buffer, so nothing past the row is read.
TF_NMT_AVX2 inline __m256 LoadAsFloat8(const float* p, int64_t valid) {
  if (valid >= 8) return _mm256_loadu_ps(p);
  alignas(32) float buf[8] = {0.0f};
  std::memcpy(buf, p, sizeof(float) * valid);
  return _mm256_load_ps(buf);
}
TF_NMT_AVX2 inline __m256 LoadAsFloat8(const uint16_t* p, int64_t valid) {
  if (valid >= 8) return WidenBf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t buf[8] = {0};
  std::memcpy(buf, p, sizeof(uint16_t) * valid);
  return WidenBf16x8(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
}

// The first `valid` (at most 8) lanes of v stored at p (as float, or rounded to bfloat16 bits).
TF_NMT_AVX2 inline void StoreFromFloat8(float* p, __m256 v, int64_t valid) {
  if (valid >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  std::memcpy(p, buf, sizeof(float) * valid);
}
TF_NMT_AVX2 inline void StoreFromFloat8(uint16_t* p, __m256 v, int64_t valid) {
  const __m128i h = NarrowToBf16x8(v);
  if (valid >= 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
    return;
  }
  alignas(16) uint16_t buf[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), h);
  std::memcpy(p, buf, sizeof(uint16_t) * valid);
}

}  // namespace tf_nmt

#else
#define TF_NMT_BF16_SIMD_AVAILABLE 0
namespace tf_nmt {
inline SimdIsa CpuSimdIsa() { return SimdIsa::kScalar; }  // not x86-64: the scalar loops
}  // namespace tf_nmt
#endif

namespace tf_nmt {
// The loops a kernel call takes: the CPU's (CpuSimdIsa), capped by the environment variable
// `env` ("scalar", "avx2" or "avx512"; unset or empty: no cap), read per call so tests can set
// it. An unknown value is an InvalidArgument error, not a silent choice.
inline absl::Status ChooseSimdIsa(const char* env, SimdIsa* isa) {
  SimdIsa cap = SimdIsa::kAvx512;
  const char* v = std::getenv(env);
  if (v != nullptr && v[0] != '\0') {
    if (std::strcmp(v, "scalar") == 0) {
      cap = SimdIsa::kScalar;
    } else if (std::strcmp(v, "avx2") == 0) {
      cap = SimdIsa::kAvx2;
    } else if (std::strcmp(v, "avx512") != 0) {
      return absl::InvalidArgumentError(std::string("$") + env +
                                        " must be scalar, avx2 or avx512, got '" + v + "'");
    }
  }
  *isa = std::min(CpuSimdIsa(), cap);
  return absl::OkStatus();
}
}  // namespace tf_nmt

#endif  // TF_NMT_BF16_SIMD_H_
