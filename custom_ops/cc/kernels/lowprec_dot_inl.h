// The log-space kernels' inner loops as templates: the per-element terms, the scalar dot
// product, and the AVX-512 register-blocked dot products and matrix multiply (see lowprec_dot.h
// for the arithmetic and the operand layouts). Included by lowprec_dot.cc, which wraps them in
// the functions lowprec_dot.h declares, and by the Table 7.5 microbenchmark
// (experiments/lowprec/cc/lowprec_bench_ops.cc), which times them directly: it is built into a
// library of its own, so the production ops library holds no benchmark code.
//
// SIMD code is compiled with per-function target attributes (TF_NMT_SIMD): nothing here may
// run with simd = true unless SimdAvailable() says so.
#ifndef TF_NMT_LOWPREC_DOT_INL_H_
#define TF_NMT_LOWPREC_DOT_INL_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "lowprec_dot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_NMT_LOWPREC_X86 1
// Everything the SIMD paths use: F (zmm, masks), BW (16/8-bit lanes, vpsravw, vpshufb),
// VBMI (vpermb), VNNI (vpdpwssd, vpdpbusd).
#define TF_NMT_SIMD __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni")))
#define TF_NMT_SIMD_INLINE TF_NMT_SIMD __attribute__((always_inline)) inline
#else
#define TF_NMT_LOWPREC_X86 0
#endif

namespace tf_nmt {
namespace lowprec {
namespace internal {

// ---- scalar fallback (same integers as the SIMD code, lane by lane) ----

inline int32_t Shift16Term(int16_t a, int16_t b) {
  const uint16_t s = static_cast<uint16_t>(a + b);  // exponents add, sign bits XOR in bit 15
  const int cnt = s & 0x7FFF;
  const int32_t p = cnt < 16 ? (0x4000 >> cnt) : 0;  // padding: count >= 16, sign 0 -> 0
  return (s & 0x8000) ? -p : p;
}

inline int32_t Lut8Term(uint8_t a, uint8_t b) {
  const uint8_t s = static_cast<uint8_t>(a + b);
  const int32_t p = (s & 0x80) ? 0 : kLut8Table[s & 15];  // vpshufb: 0 when bit 7 is set
  return (s & 0x10) ? -p : p;
}

template <Method kM>
using Elem = std::conditional_t<
    kM == Method::kFp32, float,
    std::conditional_t<kM == Method::kShift16, int16_t, uint8_t>>;
template <Method kM>
using ElemB = std::conditional_t<kM == Method::kInt8, int8_t, Elem<kM>>;
template <Method kM>
using Out = std::conditional_t<kM == Method::kFp32, float, int32_t>;

template <Method kM>
Out<kM> DotScalar(const Elem<kM>* a, const ElemB<kM>* b, int64_t kp) {
  Out<kM> acc = 0;
  for (int64_t t = 0; t < kp; ++t) {
    if constexpr (kM == Method::kShift16) {
      acc += Shift16Term(a[t], b[t]);
    } else if constexpr (kM == Method::kLut8) {
      acc += Lut8Term(a[t], b[t]);
    } else if constexpr (kM == Method::kInt8) {
      acc += static_cast<int32_t>(a[t]) * static_cast<int32_t>(b[t]);
    } else {
      acc += a[t] * b[t];
    }
  }
  return acc;
}

template <Method kM>
void MatMulScalar(const Elem<kM>* a, const ElemB<kM>* b, int64_t kp, int64_t i0, int64_t i1,
                  int64_t j0, int64_t j1, Out<kM>* out, int64_t ldo) {
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) out[i * ldo + j] = DotScalar<kM>(a + i * kp, b + j * kp, kp);
  }
}

#if TF_NMT_LOWPREC_X86

// Method-specific constants, built once per call.
struct Consts {
  __m512i c0, c1, c2;
};

template <Method kM>
TF_NMT_SIMD_INLINE Consts MakeConsts() {
  Consts c;
  if constexpr (kM == Method::kShift16) {
    c.c0 = _mm512_set1_epi16(0x7FFF);  // clears the sign bit: the shift count
    c.c1 = _mm512_set1_epi16(0x4000);  // 2^14 >> e
    c.c2 = _mm512_set1_epi16(1);       // vpdpwssd against ones: widen pairs into int32
  } else if constexpr (kM == Method::kLut8) {
    // vpshufb looks up within each 128-bit lane: the table repeated four times.
    c.c0 = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kLut8Table)));
    // vpermb table over 64 byte indices: -1 where bit 4 (the sign XOR) is set, else +1.
    alignas(64) int8_t signs[64];
    for (int i = 0; i < 64; ++i) signs[i] = (i & 0x10) ? -1 : 1;
    c.c1 = _mm512_load_si512(signs);
    c.c2 = _mm512_setzero_si512();
  } else {
    c.c0 = c.c1 = c.c2 = _mm512_setzero_si512();
  }
  return c;
}

// acc += the 64-byte slice's contribution for one pair of rows.
template <Method kM>
TF_NMT_SIMD_INLINE __m512i Step(__m512i acc, __m512i a, __m512i b, const Consts& c) {
  if constexpr (kM == Method::kShift16) {
    const __m512i s = _mm512_add_epi16(a, b);  // 32 lanes: exponent sum, sign XOR in bit 15
    // +-2^14 as (s & 0x8000) | 0x4000 (one vpternlogd), then an arithmetic shift by e:
    // -2^14 >> e = -2^(14 - e) exactly, and a count >= 16 (padding, sign 0) gives 0.
    const __m512i top = _mm512_ternarylogic_epi32(s, c.c0, c.c1, 0xBA);  // (s & ~c0) | c1
    const __m512i term = _mm512_srav_epi16(top, _mm512_and_si512(s, c.c0));
    return _mm512_dpwssd_epi32(acc, term, c.c2);
  } else if constexpr (kM == Method::kLut8) {
    const __m512i s = _mm512_add_epi8(a, b);             // 64 lanes
    const __m512i mag = _mm512_shuffle_epi8(c.c0, s);    // table[e] (0 for padding)
    const __m512i sgn = _mm512_permutexvar_epi8(s, c.c1);  // +-1 from the sign bit
    return _mm512_dpbusd_epi32(acc, mag, sgn);           // exact: |mag * sgn| <= 255
  } else if constexpr (kM == Method::kInt8) {
    return _mm512_dpbusd_epi32(acc, a, b);
  } else {
    return _mm512_castps_si512(
        _mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), _mm512_castsi512_ps(acc)));
  }
}

// An RA x RB block of dot products over nvec 64-byte slices; rows are row_bytes apart.
template <Method kM, int RA, int RB>
TF_NMT_SIMD_INLINE void Block(const char* a, const char* b, int64_t row_bytes, int64_t nvec,
                              const Consts& c, Out<kM>* out, int64_t ldo) {
  __m512i acc[RA][RB];
  for (int r = 0; r < RA; ++r)
    for (int q = 0; q < RB; ++q) acc[r][q] = _mm512_setzero_si512();
  for (int64_t v = 0; v < nvec; ++v) {
    __m512i va[RA], vb[RB];
    for (int r = 0; r < RA; ++r) va[r] = _mm512_loadu_si512(a + r * row_bytes + v * 64);
    for (int q = 0; q < RB; ++q) vb[q] = _mm512_loadu_si512(b + q * row_bytes + v * 64);
    for (int r = 0; r < RA; ++r)
      for (int q = 0; q < RB; ++q) acc[r][q] = Step<kM>(acc[r][q], va[r], vb[q], c);
  }
  for (int r = 0; r < RA; ++r) {
    for (int q = 0; q < RB; ++q) {
      if constexpr (kM == Method::kFp32) {
        out[r * ldo + q] = _mm512_reduce_add_ps(_mm512_castsi512_ps(acc[r][q]));
      } else {
        out[r * ldo + q] = _mm512_reduce_add_epi32(acc[r][q]);
      }
    }
  }
}

// 2 x 4 register blocks; B rows are taken in panels of 128 so that a panel stays in L2 while
// all A rows pass over it.
template <Method kM>
TF_NMT_SIMD void MatMulSimd(const Elem<kM>* a, const ElemB<kM>* b, int64_t kp, int64_t i0,
                            int64_t i1, int64_t j0, int64_t j1, Out<kM>* out, int64_t ldo) {
  constexpr int64_t kPanel = 128;
  const int64_t row_bytes = kp * static_cast<int64_t>(sizeof(Elem<kM>));
  const int64_t nvec = row_bytes / 64;
  const Consts c = MakeConsts<kM>();
  const char* ab = reinterpret_cast<const char*>(a);
  const char* bb = reinterpret_cast<const char*>(b);
  for (int64_t jb = j0; jb < j1; jb += kPanel) {
    const int64_t je = std::min(j1, jb + kPanel);
    int64_t i = i0;
    for (; i + 2 <= i1; i += 2) {
      int64_t j = jb;
      for (; j + 4 <= je; j += 4) {
        Block<kM, 2, 4>(ab + i * row_bytes, bb + j * row_bytes, row_bytes, nvec, c,
                        out + i * ldo + j, ldo);
      }
      for (; j < je; ++j) {
        Block<kM, 2, 1>(ab + i * row_bytes, bb + j * row_bytes, row_bytes, nvec, c,
                        out + i * ldo + j, ldo);
      }
    }
    if (i < i1) {
      int64_t j = jb;
      for (; j + 4 <= je; j += 4) {
        Block<kM, 1, 4>(ab + i * row_bytes, bb + j * row_bytes, row_bytes, nvec, c,
                        out + i * ldo + j, ldo);
      }
      for (; j < je; ++j) {
        Block<kM, 1, 1>(ab + i * row_bytes, bb + j * row_bytes, row_bytes, nvec, c,
                        out + i * ldo + j, ldo);
      }
    }
  }
}

#endif  // TF_NMT_LOWPREC_X86

template <Method kM>
void MatMul(const Elem<kM>* a, const ElemB<kM>* b, int64_t kp, int64_t i0, int64_t i1, int64_t j0,
            int64_t j1, Out<kM>* out, int64_t ldo, bool simd) {
#if TF_NMT_LOWPREC_X86
  if (simd) {
    MatMulSimd<kM>(a, b, kp, i0, i1, j0, j1, out, ldo);
    return;
  }
#endif
  MatMulScalar<kM>(a, b, kp, i0, i1, j0, j1, out, ldo);
}

}  // namespace internal
}  // namespace lowprec
}  // namespace tf_nmt

#endif  // TF_NMT_LOWPREC_DOT_INL_H_
