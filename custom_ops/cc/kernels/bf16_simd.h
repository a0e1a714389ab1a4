// bfloat16 <-> float, 16 lanes of AVX-512 at a time, with Eigen's rounding rules, for kernels
// that read and write bfloat16 tensors but compute in float.
//
// Functions carry their own target attribute: the library is built for baseline x86-64 and a
// kernel calls them only after checking the CPU (__builtin_cpu_supports).
#ifndef TF_NMT_BF16_SIMD_H_
#define TF_NMT_BF16_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#define TF_NMT_BF16_SIMD_AVAILABLE 1
// Widening and narrowing need AVX-512F only; the masked 16-bit loads and stores need BW and VL.
#define TF_NMT_AVX512F __attribute__((target("avx512f")))
#define TF_NMT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

namespace tf_nmt {

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

}  // namespace tf_nmt

#else
#define TF_NMT_BF16_SIMD_AVAILABLE 0
#endif

#endif  // TF_NMT_BF16_SIMD_H_
