// Log-space (shift16, lut8), int8 and fp32 matrix-multiply kernels: AVX-512 code compiled with
// per-function target attributes (the library itself is built for baseline x86-64, so nothing
// here runs unless SimdAvailable() says so), and a portable scalar fallback that gives the same
// integers. See lowprec_dot.h for the arithmetic and the operand layouts.
#include "lowprec_dot.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

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

const uint8_t kLut8Table[16] = {255, 172, 115, 78, 52, 35, 24, 16, 11, 7, 5, 3, 2, 1, 1, 0};
const float kLut8Mid[7] = {0x1.ac4676p-1f, 0x1.203536p-1f, 0x1.83e626p-2f, 0x1.050964p-2f,
                           0x1.5f544ep-3f, 0x1.d8daacp-4f, 0x1.3e3510p-4f};

bool SimdAvailable() {
#if TF_NMT_LOWPREC_X86
  __builtin_cpu_init();  // libgcc also checks that the OS saves the zmm/mask state (XCR0)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool SimdAllowedByEnv() {
  const char* v = std::getenv("TF_NMT_LOWPREC_SCALAR");
  return v == nullptr || v[0] == '\0' || std::strcmp(v, "0") == 0;
}

void PackShift16(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, int16_t* out) {
  const int64_t kp = PaddedK(k);
  const int16_t pad = a_side ? 16 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * k;
    int16_t* o = out + r * kp;
    for (int64_t t = 0; t < k; ++t) {
      o[t] = static_cast<int16_t>(static_cast<uint16_t>((c[t] & 7) | ((c[t] & 8) << 12)));
    }
    for (int64_t t = k; t < kp; ++t) o[t] = pad;
  }
}

void PackLut8(const uint8_t* codes, int64_t rows, int64_t k, bool a_side, uint8_t* out) {
  const int64_t kp = PaddedK(k);
  const uint8_t pad = a_side ? 0x80 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * k;
    uint8_t* o = out + r * kp;
    for (int64_t t = 0; t < k; ++t) o[t] = static_cast<uint8_t>((c[t] & 7) | ((c[t] & 8) << 1));
    for (int64_t t = k; t < kp; ++t) o[t] = pad;
  }
}

namespace {

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

// `pairs` dot products of kDotK elements each, `reps` times; returns elapsed ns. The memory
// clobber per repetition stops the compiler from hoisting the (loop-invariant) work.
constexpr int64_t kDotK = 128;

template <Method kM>
TF_NMT_SIMD double TimeDotsSimd(const Elem<kM>* a, const ElemB<kM>* b, int64_t pairs,
                                int64_t reps, Out<kM>* out) {
  constexpr int64_t kRowBytes = kDotK * static_cast<int64_t>(sizeof(Elem<kM>));
  const Consts c = MakeConsts<kM>();
  const char* ab = reinterpret_cast<const char*>(a);
  const char* bb = reinterpret_cast<const char*>(b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t rep = 0; rep < reps; ++rep) {
    for (int64_t p = 0; p < pairs; ++p) {
      Block<kM, 1, 1>(ab + p * kRowBytes, bb + p * kRowBytes, kRowBytes, kRowBytes / 64, c,
                      out + p, 1);
    }
    asm volatile("" ::: "memory");
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

#endif  // TF_NMT_LOWPREC_X86

template <Method kM>
double TimeDotsScalar(const Elem<kM>* a, const ElemB<kM>* b, int64_t pairs, int64_t reps,
                      Out<kM>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t rep = 0; rep < reps; ++rep) {
    for (int64_t p = 0; p < pairs; ++p) out[p] = DotScalar<kM>(a + p * 128, b + p * 128, 128);
#if defined(__GNUC__)
    asm volatile("" ::: "memory");
#endif
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

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

// Deterministic pseudo-random bytes (xorshift64*), for the benchmarks.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
};

// Random operands for method kM, rows x k, in the packed layout (kp = PaddedK(k)).
template <Method kM>
AlignedVector<Elem<kM>> RandomA(Rng& rng, int64_t rows, int64_t k, std::vector<uint8_t>* codes) {
  const int64_t kp = PaddedK(k);
  AlignedVector<Elem<kM>> out(rows * kp);
  if constexpr (kM == Method::kShift16 || kM == Method::kLut8) {
    codes->resize(rows * k);
    for (auto& c : *codes) c = static_cast<uint8_t>(rng.Next() >> 60);
    if constexpr (kM == Method::kShift16) {
      PackShift16(codes->data(), rows, k, true, out.data());
    } else {
      PackLut8(codes->data(), rows, k, true, out.data());
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < kp; ++t) {
        const uint64_t x = rng.Next() >> 56;
        if constexpr (kM == Method::kFp32) {
          out[r * kp + t] = t < k ? static_cast<float>(static_cast<int>(x) - 128) / 64.0f : 0.0f;
        } else {
          out[r * kp + t] = t < k ? static_cast<uint8_t>(x) : 0;
        }
      }
    }
  }
  return out;
}

template <Method kM>
AlignedVector<ElemB<kM>> RandomB(Rng& rng, int64_t rows, int64_t k) {
  const int64_t kp = PaddedK(k);
  AlignedVector<ElemB<kM>> out(rows * kp);
  if constexpr (kM == Method::kShift16 || kM == Method::kLut8) {
    std::vector<uint8_t> codes(rows * k);
    for (auto& c : codes) c = static_cast<uint8_t>(rng.Next() >> 60);
    if constexpr (kM == Method::kShift16) {
      PackShift16(codes.data(), rows, k, false, out.data());
    } else {
      PackLut8(codes.data(), rows, k, false, out.data());
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < kp; ++t) {
        const int x = static_cast<int>(rng.Next() >> 56) - 128;
        if constexpr (kM == Method::kFp32) {
          out[r * kp + t] = t < k ? static_cast<float>(x) / 64.0f : 0.0f;
        } else {
          out[r * kp + t] = static_cast<int8_t>(t < k ? x : 0);
        }
      }
    }
  }
  return out;
}

template <Method kM>
double BenchDotT(int64_t pairs, int64_t reps, bool simd, double* checksum) {
  Rng rng(7);
  std::vector<uint8_t> codes;
  const auto a = RandomA<kM>(rng, pairs, 128, &codes);
  const auto b = RandomB<kM>(rng, pairs, 128);
  AlignedVector<Out<kM>> out(pairs);
  double ns;
#if TF_NMT_LOWPREC_X86
  if (simd) {
    ns = TimeDotsSimd<kM>(a.data(), b.data(), pairs, reps, out.data());
  } else {
    ns = TimeDotsScalar<kM>(a.data(), b.data(), pairs, reps, out.data());
  }
#else
  ns = TimeDotsScalar<kM>(a.data(), b.data(), pairs, reps, out.data());
#endif
  double sum = 0.0;
  for (const auto v : out) sum += static_cast<double>(v);
  *checksum = sum;
  return ns / static_cast<double>(pairs * reps);
}

template <Method kM>
double BenchMatMulT(int64_t m, int64_t k, int64_t n, int64_t reps, bool simd, double* checksum) {
  Rng rng(11);
  const int64_t kp = PaddedK(k);
  std::vector<uint8_t> a_codes;
  auto a = RandomA<kM>(rng, m, k, &a_codes);
  const auto b = RandomB<kM>(rng, n, k);  // the weights: packed once, outside the timing
  AlignedVector<Out<kM>> acc(m * n);
  AlignedVector<float> out(m * n);
  const float scale = 0.5f;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t rep = 0; rep < reps; ++rep) {
    if constexpr (kM == Method::kShift16) {
      PackShift16(a_codes.data(), m, k, true, a.data());
    } else if constexpr (kM == Method::kLut8) {
      PackLut8(a_codes.data(), m, k, true, a.data());
    }
    if constexpr (kM == Method::kFp32) {
      MatMul<kM>(a.data(), b.data(), kp, 0, m, 0, n, out.data(), n, simd);
    } else {
      MatMul<kM>(a.data(), b.data(), kp, 0, m, 0, n, acc.data(), n, simd);
      for (int64_t i = 0; i < m * n; ++i) out[i] = static_cast<float>(acc[i]) * scale;
    }
#if defined(__GNUC__)
    asm volatile("" ::: "memory");
#endif
  }
  const auto t1 = std::chrono::steady_clock::now();
  double sum = 0.0;
  for (const float v : out) sum += v;
  *checksum = sum;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(reps);
}

}  // namespace

void MatMulShift16(const int16_t* a, const int16_t* b, int64_t kp, int64_t i0, int64_t i1,
                   int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  MatMul<Method::kShift16>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulLut8(const uint8_t* a, const uint8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  MatMul<Method::kLut8>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulInt8(const uint8_t* a, const int8_t* b, int64_t kp, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1, int32_t* out, int64_t ldo, bool simd) {
  MatMul<Method::kInt8>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

void MatMulFp32(const float* a, const float* b, int64_t kp, int64_t i0, int64_t i1, int64_t j0,
                int64_t j1, float* out, int64_t ldo, bool simd) {
  MatMul<Method::kFp32>(a, b, kp, i0, i1, j0, j1, out, ldo, simd);
}

double BenchDot(Method method, int64_t pairs, int64_t reps, bool simd, double* checksum) {
  switch (method) {
    case Method::kFp32: return BenchDotT<Method::kFp32>(pairs, reps, simd, checksum);
    case Method::kInt8: return BenchDotT<Method::kInt8>(pairs, reps, simd, checksum);
    case Method::kShift16: return BenchDotT<Method::kShift16>(pairs, reps, simd, checksum);
    case Method::kLut8: return BenchDotT<Method::kLut8>(pairs, reps, simd, checksum);
  }
  return 0.0;
}

double BenchMatMul(Method method, int64_t m, int64_t k, int64_t n, int64_t reps, bool simd,
                   double* checksum) {
  switch (method) {
    case Method::kFp32: return BenchMatMulT<Method::kFp32>(m, k, n, reps, simd, checksum);
    case Method::kInt8: return BenchMatMulT<Method::kInt8>(m, k, n, reps, simd, checksum);
    case Method::kShift16: return BenchMatMulT<Method::kShift16>(m, k, n, reps, simd, checksum);
    case Method::kLut8: return BenchMatMulT<Method::kLut8>(m, k, n, reps, simd, checksum);
  }
  return 0.0;
}

}  // namespace lowprec
}  // namespace tf_nmt
