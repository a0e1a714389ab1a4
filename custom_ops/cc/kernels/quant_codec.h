// Scalar encode/decode rules for the log and fixed-point quantisers (host and device).
//
// A B-bit code is (sign << (B-1)) | k with sign = (v < 0) and magnitude index k in [0, L),
// L = 2^(B-1). Centres, relative to the scale S:
//   log:   2^-k             (q = -k in (-L, 0]); nearest in normal space: q = ceil(log2(2/3 t))
//   fixed: (k + 1) / L      (uniform, no zero level); nearest, ties go down
// with t = |v| / S. Both are computed with exact float steps (frexp, power-of-two scaling) so a
// NumPy reference reproduces them bit for bit. 0 and NaN map to the smallest magnitude (NaN with
// sign 0); +-Inf map to the largest. Subnormal inputs, ratios and centres are flushed to zero
// explicitly, so results do not depend on the thread's FTZ/DAZ mode (TF sets it on CPU).
#ifndef TF_NMT_QUANT_CODEC_H_
#define TF_NMT_QUANT_CODEC_H_

#include <math.h>

#include <cfloat>

#if defined(__CUDACC__)
#define TF_NMT_HD __host__ __device__
#else
#define TF_NMT_HD
#endif

namespace tf_nmt {

// x if it is a normal float >= FLT_MIN (or +Inf), else 0 (also for NaN).
TF_NMT_HD inline float FlushTiny(float x) { return x >= FLT_MIN ? x : 0.0f; }

// |v| / scale with tiny values flushed; 0 when the scale is 0.
TF_NMT_HD inline float Ratio(float magnitude, float scale) {
  const float s = FlushTiny(scale);
  return s > 0.0f ? FlushTiny(FlushTiny(magnitude) / s) : 0.0f;
}

struct LogCodec {
  static TF_NMT_HD inline int MagIndex(float t, int levels) {
    if (!(t > 0.0f)) return levels - 1;  // zero or NaN
    if (!(t <= FLT_MAX)) return 0;       // +Inf
    int e = 0;
    const float m = frexpf(t, &e);  // t = m * 2^e, m in [0.5, 1)
    const int q = (m <= 0.75f) ? e - 1 : e;
    const int k = -q;
    return k < 0 ? 0 : (k > levels - 1 ? levels - 1 : k);
  }
  // Centre relative to S.
  static TF_NMT_HD inline float Centre(int k, int /*bits*/) { return FlushTiny(ldexpf(1.0f, -k)); }
  static TF_NMT_HD inline float Decode(float scale, int k, int /*bits*/) {
    return FlushTiny(ldexpf(scale, -k));
  }
};

struct FixedCodec {
  static TF_NMT_HD inline int MagIndex(float t, int levels) {
    if (!(t > 0.0f)) return 0;  // zero or NaN
    const float u = fminf(t, 2.0f) * static_cast<float>(levels);
    const int j = static_cast<int>(ceilf(u - 0.5f));
    return j < 1 ? 0 : (j > levels ? levels - 1 : j - 1);
  }
  static TF_NMT_HD inline float Centre(int k, int bits) {
    return FlushTiny(ldexpf(static_cast<float>(k + 1), -(bits - 1)));
  }
  static TF_NMT_HD inline float Decode(float scale, int k, int bits) {
    return FlushTiny(ldexpf(scale * static_cast<float>(k + 1), -(bits - 1)));
  }
};

template <class Codec>
TF_NMT_HD inline unsigned char EncodeOne(float v, float scale, int bits) {
  const int levels = 1 << (bits - 1);
  const int k = Codec::MagIndex(Ratio(fabsf(v), scale), levels);
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
