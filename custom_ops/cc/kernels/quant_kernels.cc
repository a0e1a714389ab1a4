// CPU kernels for the log and fixed-point quantisers: fit scale, encode, decode, fused
// quantise (fit + encode) and quantise-dequantise (fit + encode + decode).
//
// Scale fitting ("optimised") starts at S = max|v| and iterates S = sum(c|v|) / sum(c^2) with c
// the relative centre chosen for each v under the current S (least squares in normal space),
// stopping when S no longer changes in float. Non-finite values are ignored by the fit, and S is
// capped at 2^126 (kMaxScale) so that 1 / S stays a normal float.
// Partial sums are per fixed block in double and combined in block order: deterministic.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "parallel_blocks.h"
#include "quant_codec.h"
#include "quant_inputs.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
namespace errors = tensorflow::errors;

namespace {

template <typename T>
float MaxAbs(OpKernelContext* ctx, const T* x, int64_t n) {
  std::vector<float> part(NumBlocks(n), 0.0f);
  ForEachBlock(ctx, part.size(), [&](int64_t b) {
    const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
    float m = 0.0f;
    for (int64_t i = lo; i < hi; ++i) {
      const float a = FlushTiny(std::fabs(static_cast<float>(x[i])));
      m = a <= FLT_MAX && a > m ? a : m;  // skips NaN and Inf
    }
    part[b] = m;
  });
  float m = 0.0f;
  for (float p : part) m = std::max(m, p);
  return m;
}

// Sums of c * |v| and c^2 over finite x[lo, hi), c the centres chosen under S (the reference's
// float64 sums). Chunks of simple array loops (they vectorise); eight explicit double lanes in
// a fixed order, so the result does not depend on the compiler or threads. A float times a float
// is exact in double, so for values already on a grid S * c the sums are S * sum(c^2) and
// sum(c^2) up to double rounding, and the fitted scale comes back as exactly S: re-quantising a
// quantised tensor is lossless.
template <class Codec, typename T>
inline __attribute__((always_inline)) void FitSumsBody(const T* x, int64_t lo, int64_t hi,
                                                       float inv_scale, int bits, double* num,
                                                       double* den) {
  constexpr int kChunk = 512;
  constexpr int kLanes = 8;
  const int levels = 1 << (bits - 1);
  double an[kLanes] = {0}, ad[kLanes] = {0};
  float a[kChunk], c[kChunk];
  for (int64_t start = lo; start < hi; start += kChunk) {
    const int m = static_cast<int>(std::min<int64_t>(hi - start, kChunk));
    for (int j = 0; j < m; ++j) {
      const float raw = FlushTiny(std::fabs(static_cast<float>(x[start + j])));
      a[j] = raw <= FLT_MAX ? raw : -1.0f;  // -1 marks a non-finite value (left out)
    }
    for (int j = 0; j < m; ++j) {
      const float cj = Codec::Centre(Codec::MagIndex(Ratio(a[j], inv_scale), levels), bits);
      c[j] = a[j] >= 0.0f ? cj : 0.0f;  // a non-finite value (a = -1) adds 0 * -1 below
    }
    int j = 0;
    for (; j + kLanes <= m; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const double cl = c[j + l];
        an[l] += cl * static_cast<double>(a[j + l]);
        ad[l] += cl * cl;
      }
    }
    for (int l = 0; j < m; ++j, ++l) {
      const double cj = c[j];
      an[l] += cj * static_cast<double>(a[j]);
      ad[l] += cj * cj;
    }
  }
  double dn = 0.0, dd = 0.0;
  for (int l = 0; l < kLanes; ++l) {
    dn += an[l];
    dd += ad[l];
  }
  *num = dn;
  *den = dd;
}

// float32 entry points get an AVX2 clone picked at load time (portable: the default clone
// is plain x86-64); lanes are explicit and no FMA is used, so both clones give equal results.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TF_NMT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TF_NMT_CLONES
#endif

TF_NMT_CLONES void FitSumsLogF32(const float* x, int64_t lo, int64_t hi, float inv, int bits,
                                 double* num, double* den) {
  FitSumsBody<LogCodec, float>(x, lo, hi, inv, bits, num, den);
}

TF_NMT_CLONES void FitSumsFixedF32(const float* x, int64_t lo, int64_t hi, float inv, int bits,
                                   double* num, double* den) {
  FitSumsBody<FixedCodec, float>(x, lo, hi, inv, bits, num, den);
}

template <class Codec, typename T>
void FitSums(const T* x, int64_t lo, int64_t hi, float inv_scale, int bits, double* num,
             double* den) {
  if constexpr (std::is_same<T, float>::value && std::is_same<Codec, LogCodec>::value) {
    FitSumsLogF32(x, lo, hi, inv_scale, bits, num, den);
  } else if constexpr (std::is_same<T, float>::value) {
    FitSumsFixedF32(x, lo, hi, inv_scale, bits, num, den);
  } else {
    FitSumsBody<Codec, T>(x, lo, hi, inv_scale, bits, num, den);
  }
}

template <class Codec, typename T>
float FitScale(OpKernelContext* ctx, const T* x, int64_t n, int bits, const std::string& mode,
               int iterations) {
  if (mode == "unscaled") return 1.0f;
  float scale = std::min(MaxAbs(ctx, x, n), kMaxScale);
  if (mode == "max" || scale == 0.0f) return scale;
  std::vector<double> num(NumBlocks(n)), den(NumBlocks(n));
  for (int it = 0; it < iterations; ++it) {
    const float inv = InvScale(scale);
    ForEachBlock(ctx, num.size(), [&](int64_t b) {
      const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
      FitSums<Codec, T>(x, lo, hi, inv, bits, &num[b], &den[b]);
    });
    double sn = 0.0, sd = 0.0;  // sum(c |v|), sum(c^2)
    for (size_t b = 0; b < num.size(); ++b) {
      sn += num[b];
      sd += den[b];
    }
    if (!(sd > 0.0)) break;
    const float next = static_cast<float>(std::min(sn / sd, static_cast<double>(kMaxScale)));
    if (!(next >= FLT_MIN) || next == scale) break;
    scale = next;
  }
  return scale;
}

template <class Codec, typename T>
void Encode(OpKernelContext* ctx, const T* x, int64_t n, float scale, int bits,
            unsigned char* codes) {
  const float inv = InvScale(scale);
  ForEachBlock(ctx, NumBlocks(n), [&](int64_t b) {
    const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
    for (int64_t i = lo; i < hi; ++i) codes[i] = EncodeOne<Codec>(static_cast<float>(x[i]), inv, bits);
  });
}

template <class Codec, typename T>
void QuantDequant(OpKernelContext* ctx, const T* x, int64_t n, float scale, int bits, T* y) {
  const float inv = InvScale(scale);
  ForEachBlock(ctx, NumBlocks(n), [&](int64_t b) {
    const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
    for (int64_t i = lo; i < hi; ++i) {
      const unsigned char c = EncodeOne<Codec>(static_cast<float>(x[i]), inv, bits);
      y[i] = static_cast<T>(DecodeOne<Codec>(c, scale, bits));
    }
  });
}

// Base for ops with attrs mode/iterations.
class FitAttrs : public OpKernel {
 public:
  explicit FitAttrs(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("mode", &mode_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("iterations", &iterations_));
  }

 protected:
  std::string mode_;
  int iterations_ = 0;
};

// Fit: (x, bits) -> scale.
template <class Codec, typename T>
class FitOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    const Tensor& x = ctx->input(0);
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &s));
    s->scalar<float>()() =
        FitScale<Codec, T>(ctx, x.flat<T>().data(), x.NumElements(), bits, mode_, iterations_);
  }
};

// Encode: (x, scale, bits) -> codes.
template <class Codec, typename T>
class EncodeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadScale(ctx->input(1), &scale));
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(2), &bits));
    const Tensor& x = ctx->input(0);
    Tensor* codes = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    Encode<Codec, T>(ctx, x.flat<T>().data(), x.NumElements(), scale, bits,
                     codes->flat<tensorflow::uint8>().data());
  }
};

// Decode: (codes, scale, bits) -> y.
template <class Codec, typename T>
class DecodeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadScale(ctx->input(1), &scale));
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(2), &bits));
    const Tensor& codes = ctx->input(0);
    const unsigned char* c = codes.flat<tensorflow::uint8>().data();
    const int64_t n = codes.NumElements();
    Tensor* y_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, codes.shape(), &y_t));
    T* y = y_t->flat<T>().data();
    std::vector<char> bad(NumBlocks(n), 0);
    ForEachBlock(ctx, NumBlocks(n), [&](int64_t b) {
      const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
      unsigned char high = 0;
      for (int64_t i = lo; i < hi; ++i) {
        high |= c[i] >> bits;
        y[i] = static_cast<T>(DecodeOne<Codec>(c[i], scale, bits));
      }
      bad[b] = high != 0;
    });
    OP_REQUIRES(ctx, std::find(bad.begin(), bad.end(), 1) == bad.end(),
                errors::InvalidArgument("codes must be < 2^bits = ", 1 << bits));
  }
};

// Quantize: (x, bits) -> (codes, scale): fit + encode in one op.
template <class Codec, typename T>
class QuantizeOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    const Tensor& x = ctx->input(0);
    const T* xp = x.flat<T>().data();
    const float scale = FitScale<Codec, T>(ctx, xp, x.NumElements(), bits, mode_, iterations_);
    Tensor* codes = nullptr;
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &s));
    s->scalar<float>()() = scale;
    Encode<Codec, T>(ctx, xp, x.NumElements(), scale, bits, codes->flat<tensorflow::uint8>().data());
  }
};

// QuantizeDequantize: (x, bits) -> (decode(encode(x)), scale); straight-through in Python.
template <class Codec, typename T>
class QuantDequantOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    const Tensor& x = ctx->input(0);
    const T* xp = x.flat<T>().data();
    const float scale = FitScale<Codec, T>(ctx, xp, x.NumElements(), bits, mode_, iterations_);
    Tensor* y = nullptr;
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &s));
    s->scalar<float>()() = scale;
    QuantDequant<Codec, T>(ctx, xp, x.NumElements(), scale, bits, y->flat<T>().data());
  }
};

}  // namespace

#define TF_NMT_REGISTER_QUANT(PREFIX, CODEC, T)                                               \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(PREFIX "QuantizeFit").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),       \
      FitOp<CODEC, T>);                                                                       \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(PREFIX "QuantizeEncode").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),    \
      EncodeOp<CODEC, T>);                                                                    \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeDecode")                                       \
                              .Device(tensorflow::DEVICE_CPU)                                 \
                              .TypeConstraint<T>("out_type"),                                 \
                          DecodeOp<CODEC, T>);                                                \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(PREFIX "Quantize").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),          \
      QuantizeOp<CODEC, T>);                                                                  \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeDequantize")                                   \
                              .Device(tensorflow::DEVICE_CPU)                                 \
                              .TypeConstraint<T>("T"),                                        \
                          QuantDequantOp<CODEC, T>);

#define TF_NMT_REGISTER_QUANT_TYPES(PREFIX, CODEC)         \
  TF_NMT_REGISTER_QUANT(PREFIX, CODEC, float)              \
  TF_NMT_REGISTER_QUANT(PREFIX, CODEC, Eigen::half)        \
  TF_NMT_REGISTER_QUANT(PREFIX, CODEC, tensorflow::bfloat16)

TF_NMT_REGISTER_QUANT_TYPES("Log", LogCodec)
TF_NMT_REGISTER_QUANT_TYPES("Fixed", FixedCodec)
#undef TF_NMT_REGISTER_QUANT_TYPES
#undef TF_NMT_REGISTER_QUANT

}  // namespace tf_nmt
