// Bit-exact float <-> half / bfloat16 conversions and CPU-style flushed float adds for the CUDA
// kernels (host and device), so that GPU results equal the CPU kernels' bit for bit.
//
// The CPU kernels compute in Eigen::half / Eigen::bfloat16, whose x86-64 conversions (no F16C in
// our build flags) are the bit-manipulation routines reproduced here: round to nearest even,
// NaN -> quiet NaN with the sign kept (0x7e00 / 0x7fc0 patterns). Arithmetic on them is "convert
// to float, operate in float, round back", which FloatAdd/FloatSub below mirror. TF runs CPU
// kernels with FTZ/DAZ set (subnormal inputs read as zero, subnormal results flushed to a zero
// of the same sign); the device has no such mode by default, so Daz()/FtzAdd() flush
// explicitly. Half values are never subnormal as floats, so the flush is a no-op there.
#ifndef TF_NMT_FLOAT16_GPU_H_
#define TF_NMT_FLOAT16_GPU_H_

#include <stdint.h>
#include <string.h>

#include <cfloat>

#if defined(__CUDACC__)
#define TF_NMT_HD __host__ __device__
#else
#define TF_NMT_HD
#endif

namespace tf_nmt {

// Layout-compatible stand-ins for Eigen::half and Eigen::bfloat16 (one uint16 each), so the
// .cu.cc files need no TensorFlow or Eigen headers.
struct Half16 {
  uint16_t x;
};
struct Bf16 {
  uint16_t x;
};

TF_NMT_HD inline uint32_t F16FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

TF_NMT_HD inline float F16BitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// x, or a zero of x's sign when x is subnormal (x86 DAZ on an input, FTZ on a result).
TF_NMT_HD inline float Daz(float x) {
  return (F16FloatBits(x) & 0x7f800000u) == 0u ? F16BitsFloat(F16FloatBits(x) & 0x80000000u) : x;
}

// The NaN an x86 SSE add/sub returns for operands a, b and device result r: a NaN operand comes
// back quieted with its sign and payload (a's when both are NaN, as for addss/subss with a as the
// first source), and an invalid operation (inf - inf) gives the "real indefinite" NaN 0xffc00000.
// CUDA returns its canonical 0x7fffffff in all these cases, so NaN-carrying residuals differed
// from the CPU's in sign and payload (first seen on an H100: 23 of 511 golden cases).
TF_NMT_HD inline float X86Nan(float a, float b, float r) {
  if (!(r != r)) return r;
  if (a != a) return F16BitsFloat(F16FloatBits(a) | 0x00400000u);
  if (b != b) return F16BitsFloat(F16FloatBits(b) | 0x00400000u);
  return F16BitsFloat(0xffc00000u);
}

// a + b and a - b as TF's CPU threads compute them (DAZ + FTZ, x86 NaN results).
TF_NMT_HD inline float FtzAdd(float a, float b) {
  const float x = Daz(a), y = Daz(b);
  return X86Nan(x, y, Daz(x + y));
}
TF_NMT_HD inline float FtzSub(float a, float b) {
  const float x = Daz(a), y = Daz(b);
  return X86Nan(x, y, Daz(x - y));
}

// Eigen::half_impl::half_to_float (bit path).
TF_NMT_HD inline float HalfToFloat(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;
  } else if (exp == 0) {
    o += 1u << 23;
    o = F16FloatBits(F16BitsFloat(o) - F16BitsFloat(113u << 23));
  }
  return F16BitsFloat(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

// Eigen::half_impl::float_to_half_rtne (bit path). The subnormal branch's float add cannot see
// a subnormal operand that matters: anything below 2^-25 rounds to 0 either way.
TF_NMT_HD inline uint16_t FloatToHalf(float ff) {
  const uint32_t f32infty = 255u << 23;
  const uint32_t f16max = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t f = F16FloatBits(ff);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t o;
  if (f >= f16max) {
    o = f > f32infty ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {
    const float sum = F16BitsFloat(f) + F16BitsFloat(denorm_magic);
    o = static_cast<uint16_t>(F16FloatBits(sum) - denorm_magic);
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += 0xc8000fffu;
    f += mant_odd;
    o = static_cast<uint16_t>(f >> 13);
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

TF_NMT_HD inline float Bf16ToFloat(uint16_t b) { return F16BitsFloat(static_cast<uint32_t>(b) << 16); }

// Eigen::bfloat16_impl::float_to_bfloat16_rtne<false>.
TF_NMT_HD inline uint16_t FloatToBf16(float ff) {
  const uint32_t u = F16FloatBits(ff);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u & 0x80000000u) ? 0xffc0 : 0x7fc0;
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

// Element access for the three supported element types.
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static TF_NMT_HD inline float Load(float v) { return v; }
  static TF_NMT_HD inline float Store(float f) { return f; }
};
template <>
struct Elem<Half16> {
  static TF_NMT_HD inline float Load(Half16 v) { return HalfToFloat(v.x); }
  static TF_NMT_HD inline Half16 Store(float f) { return Half16{FloatToHalf(f)}; }
};
template <>
struct Elem<Bf16> {
  static TF_NMT_HD inline float Load(Bf16 v) { return Bf16ToFloat(v.x); }
  static TF_NMT_HD inline Bf16 Store(float f) { return Bf16{FloatToBf16(f)}; }
};

// a + b in T as the CPU kernels compute it (Eigen's operator+ for half / bfloat16).
template <typename T>
TF_NMT_HD inline T AddAsCpu(T a, T b) {
  return Elem<T>::Store(FtzAdd(Elem<T>::Load(a), Elem<T>::Load(b)));
}
template <typename T>
TF_NMT_HD inline T SubAsCpu(T a, T b) {
  return Elem<T>::Store(FtzSub(Elem<T>::Load(a), Elem<T>::Load(b)));
}

}  // namespace tf_nmt

#endif  // TF_NMT_FLOAT16_GPU_H_
