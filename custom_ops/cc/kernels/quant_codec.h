// Scalar encode/decode rules for the log and fixed-point quantisers (host and device).
//
// A B-bit code is (sign << (B-1)) | k with sign = (v < 0) and magnitude index k in [0, L),
// L = 2^(B-1). Centres, relative to the scale S:
//   log:   2^-k             (q = -k in (-L, 0]); nearest in normal space: q = ceil(log2(2/3 t))
//   fixed: (k + 1) / L      (uniform, no zero level); nearest, ties go down
// with t = |v| * (1 / S). Both are computed with exact float steps (bit fields, power-of-two
// scaling) and no branches, so loops vectorise and a NumPy reference reproduces them bit for bit. 0 and NaN map to the smallest magnitude (NaN with
// sign 0); +-Inf map to the largest. Subnormal inputs, ratios and centres are flushed to zero
// explicitly, so results do not depend on the thread's FTZ/DAZ mode (TF sets it on CPU).
#ifndef TF_NMT_QUANT_CODEC_H_
#define TF_NMT_QUANT_CODEC_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cfloat>

#if defined(__CUDACC__)
#define TF_NMT_HD __host__ __device__
#else
#define TF_NMT_HD
#endif

namespace tf_nmt {

// x if it is a normal float >= FLT_MIN (or +Inf), else 0 (also for NaN).
TF_NMT_HD inline float FlushTiny(float x) { return x >= FLT_MIN ? x : 0.0f; }

TF_NMT_HD inline uint32_t FloatBits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  return u;
}

TF_NMT_HD inline float BitsFloat(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof(x));
  return x;
}

// 2^-p for 0 <= p <= 126 (exact, built from the exponent bits).
TF_NMT_HD inline float PowTwoNeg(int p) { return BitsFloat(static_cast<uint32_t>(127 - p) << 23); }

// Largest scale used for encoding, 2^126, so that 1 / S is still a normal float.
constexpr float kMaxScale = 8.507059173023462e37f;

// 1 / S for a flushed scale S capped at kMaxScale, or 0 when S is 0 (every value then gets the
// smallest centre).
TF_NMT_HD inline float InvScale(float scale) {
  const float s = FlushTiny(scale);
  return s > 0.0f ? 1.0f / (s < kMaxScale ? s : kMaxScale) : 0.0f;
}

// t = |v| / S as |v| * (1 / S), tiny values flushed (NaN -> 0, Inf stays Inf).
TF_NMT_HD inline float Ratio(float magnitude, float inv_scale) {
  return FlushTiny(FlushTiny(magnitude) * inv_scale);
}

TF_NMT_HD inline int Clamp(int k, int hi) { return k < 0 ? 0 : (k > hi ? hi : k); }

struct LogCodec {
  // t is 0, a normal float or +Inf. With t = m * 2^e, m in [0.5, 1) (frexp): q = e - 1 if
  // m <= 0.75 else e, i.e. q = ceil(log2(2/3 t)); read from the float's bits. t = 0 gives
  // q = -127 and Inf q = 128, both then clamped.
  static TF_NMT_HD inline int MagIndex(float t, int levels) {
    const uint32_t u = FloatBits(t);
    const int e = static_cast<int>(u >> 23) - 126;
    const int q = e - 1 + ((u & 0x7FFFFFu) > 0x400000u ? 1 : 0);
    return Clamp(-q, levels - 1);
  }
  // Centre relative to S: 2^-k (0 for the subnormal 2^-127).
  static TF_NMT_HD inline float Centre(int k, int /*bits*/) {
    return k <= 126 ? PowTwoNeg(k) : 0.0f;
  }
  // FlushTiny(ldexp(scale, -k)) by exponent arithmetic.
  static TF_NMT_HD inline float Decode(float scale, int k, int /*bits*/) {
    const uint32_t u = FloatBits(FlushTiny(scale));
    return static_cast<int>(u >> 23) - k >= 1 ? BitsFloat(u - (static_cast<uint32_t>(k) << 23))
                                               : 0.0f;
  }
};

struct FixedCodec {
  // Nearest of the centres j / L, j = 1..L, to t (ties go down): j = ceil(t L - 1/2), clamped.
  static TF_NMT_HD inline int MagIndex(float t, int levels) {
    const float y = (t < 2.0f ? t : 2.0f) * static_cast<float>(levels) - 0.5f;  // exact, >= -0.5
    const int fl = static_cast<int>(y);                                  // floor for y > -1
    const int j = fl + (static_cast<float>(fl) < y ? 1 : 0);
    return Clamp(j - 1, levels - 1);
  }
  static TF_NMT_HD inline float Centre(int k, int bits) {
    return PowTwoNeg(bits - 1) * static_cast<float>(k + 1);
  }
  static TF_NMT_HD inline float Decode(float scale, int k, int bits) {
    return FlushTiny(FlushTiny(FlushTiny(scale) * PowTwoNeg(bits - 1)) * static_cast<float>(k + 1));
  }
};

template <class Codec>
TF_NMT_HD inline unsigned char EncodeOne(float v, float inv_scale, int bits) {
  const int levels = 1 << (bits - 1);
  const int k = Codec::MagIndex(Ratio(fabsf(v), inv_scale), levels);
  const int sign = v <= -FLT_MIN ? 1 : 0;
  return static_cast<unsigned char>((sign << (bits - 1)) | k);
}

template <class Codec>
TF_NMT_HD inline float DecodeOne(unsigned char code, float scale, int bits) {
  const int levels = 1 << (bits - 1);
  const int k = code & (levels - 1);
  const float m = Codec::Decode(scale, k, bits);
  return (code >> (bits - 1)) & 1 ? -m : m;
}

}  // namespace tf_nmt

#endif  // TF_NMT_QUANT_CODEC_H_
