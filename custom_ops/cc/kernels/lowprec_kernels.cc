// CPU kernels for the log-space dot-product ops (lowprec_ops.cc): LowprecEncode,
// LowprecMatMulAccum / LowprecMatMul on 4-bit codes, and LowprecSimdAvailable. The arithmetic
// lives in lowprec_dot.{h,cc}; this file checks arguments, packs operands and shards tiles of
// the output over TF's intra-op threads (the integers do not depend on the split). The Table 7.5
// microbenchmark ops are experiment code (experiments/lowprec/cc), built into a library of their
// own.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lowprec_dot.h"
#include "lowprec_impl_attr.h"
#include "parallel_blocks.h"
#include "quant_codec.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;
namespace lp = tf_nmt::lowprec;

namespace {

Status ReadScalarScale(const Tensor& t, const char* name, float* scale) {
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return errors::InvalidArgument(name, " must be a scalar, got shape ", t.shape().DebugString());
  }
  *scale = t.scalar<float>()();
  if (!(*scale >= 0.0f && *scale <= FLT_MAX)) {
    return errors::InvalidArgument(name, " must be finite and >= 0, got ", *scale);
  }
  return tensorflow::OkStatus();
}

// The lut8 code of v: k = number of thresholds kLut8Mid[j] >= t (ties to the smaller centre),
// t = |v| * (1 / S) flushed as in quant_codec.h, so 0/NaN -> k = 7 and Inf -> k = 0.
inline unsigned char EncodeLut8(float v, float inv_scale) {
  const float t = Ratio(std::fabs(v), inv_scale);
  int k = 0;
  for (int j = 0; j < 7; ++j) k += t <= lp::kLut8Mid[j] ? 1 : 0;
  const int sign = v <= -FLT_MIN ? 1 : 0;
  return static_cast<unsigned char>((sign << 3) | k);
}

template <typename T>
class EncodeOp : public OpKernel {
 public:
  explicit EncodeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string variant;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("scheme", &variant));
    lut8_ = variant == "lut8";
  }

  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    OP_REQUIRES_OK(ctx, ReadScalarScale(ctx->input(1), "scale", &scale));
    const Tensor& x_t = ctx->input(0);
    Tensor* codes_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_t.shape(), &codes_t));
    const T* x = x_t.flat<T>().data();
    unsigned char* codes = codes_t->flat<tensorflow::uint8>().data();
    const int64_t n = x_t.NumElements();
    const float inv = InvScale(scale);
    const bool lut8 = lut8_;
    ForEachBlock(ctx, NumBlocks(n), [&](int64_t b) {
      const int64_t lo = b * kBlockSize, hi = std::min(n, lo + kBlockSize);
      for (int64_t i = lo; i < hi; ++i) {
        const float v = static_cast<float>(x[i]);
        codes[i] = lut8 ? EncodeLut8(v, inv) : EncodeOne<LogCodec>(v, inv, 4);
      }
    });
  }

 private:
  bool lut8_ = false;
};

// Shared by LowprecMatMulAccum (kScaled = false: int32 out) and LowprecMatMul (float out).
template <bool kScaled>
class MatMulOp : public OpKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string variant;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("scheme", &variant));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("impl", &impl_));
    lut8_ = variant == "lut8";
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a_t = ctx->input(0);
    const Tensor& b_t = ctx->input(1);
    OP_REQUIRES(ctx, a_t.dims() == 2,
                errors::InvalidArgument("a_codes must be [M, K], got shape ", a_t.shape().DebugString()));
    OP_REQUIRES(ctx, b_t.dims() == 2,
                errors::InvalidArgument("b_codes must be [N, K], got shape ", b_t.shape().DebugString()));
    const int64_t m = a_t.dim_size(0), k = a_t.dim_size(1), n = b_t.dim_size(0);
    OP_REQUIRES(ctx, b_t.dim_size(1) == k,
                errors::InvalidArgument("a_codes [M, K] and b_codes [N, K] disagree on K: ",
                                        a_t.shape().DebugString(), " vs ", b_t.shape().DebugString()));
    const int64_t max_k = lut8_ ? lp::kLut8MaxK : lp::kShift16MaxK;
    OP_REQUIRES(ctx, k <= max_k,
                errors::InvalidArgument("K = ", k, " exceeds ", max_k, " (the int32 accumulator)"));
    float c = 0.0f;
    if (kScaled) {
      float sa = 0.0f, sb = 0.0f;
      OP_REQUIRES_OK(ctx, ReadScalarScale(ctx->input(2), "scale_a", &sa));
      OP_REQUIRES_OK(ctx, ReadScalarScale(ctx->input(3), "scale_b", &sb));
      const float ab = sa * sb;
      c = lut8_ ? ab / static_cast<float>(lp::kLut8One) : ab * 0x1p-14f;
    }
    bool simd = false;
    OP_REQUIRES_OK(ctx, lp::ResolveImpl(impl_, &simd));
    const uint8_t* a = a_t.flat<tensorflow::uint8>().data();
    const uint8_t* b = b_t.flat<tensorflow::uint8>().data();
    OP_REQUIRES(ctx, MaxCode(a, m * k) < 16 && MaxCode(b, n * k) < 16,
                errors::InvalidArgument("codes must be 4-bit (< 16), one per byte"));

    Tensor* out_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {m, n}, &out_t));
    if (m == 0 || n == 0) return;
    const int64_t kp = lp::PaddedK(k);
    // int32 results: the output itself, or a temporary that is scaled into the float output.
    std::vector<int32_t> scratch(kScaled ? m * n : 0);
    int32_t* acc = kScaled ? scratch.data() : out_t->flat<int32_t>().data();
    float* y = kScaled ? out_t->flat<float>().data() : nullptr;

    lp::AlignedVector<int16_t> a16, b16;
    lp::AlignedVector<uint8_t> a8, b8;
    if (lut8_) {
      a8.resize(m * kp);
      b8.resize(n * kp);
      lp::PackLut8(a, m, k, true, a8.data());
      lp::PackLut8(b, n, k, false, b8.data());
    } else {
      a16.resize(m * kp);
      b16.resize(n * kp);
      lp::PackShift16(a, m, k, true, a16.data());
      lp::PackShift16(b, n, k, false, b16.data());
    }
    // Tiles of 16 rows x 128 columns, spread over the intra-op threads.
    constexpr int64_t kTm = 16, kTn = 128;
    const int64_t tiles_m = (m + kTm - 1) / kTm, tiles_n = (n + kTn - 1) / kTn;
    const bool lut8 = lut8_;
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t i0 = (t / tiles_n) * kTm, j0 = (t % tiles_n) * kTn;
        const int64_t i1 = std::min(m, i0 + kTm), j1 = std::min(n, j0 + kTn);
        if (lut8) {
          lp::MatMulLut8(a8.data(), b8.data(), kp, i0, i1, j0, j1, acc, n, simd);
        } else {
          lp::MatMulShift16(a16.data(), b16.data(), kp, i0, i1, j0, j1, acc, n, simd);
        }
        if (kScaled) {
          for (int64_t i = i0; i < i1; ++i) {
            for (int64_t j = j0; j < j1; ++j) y[i * n + j] = static_cast<float>(acc[i * n + j]) * c;
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const int64_t cost = kTm * kTn * std::max<int64_t>(kp, 1) * (simd ? 1 : 16);
    tensorflow::Shard(workers->num_threads, workers->workers, tiles_m * tiles_n, cost, run);
  }

 private:
  static uint8_t MaxCode(const uint8_t* c, int64_t n) {
    uint8_t hi = 0;
    for (int64_t i = 0; i < n; ++i) hi = std::max(hi, c[i]);
    return hi;
  }

  std::string impl_;
  bool lut8_ = false;
};

class SimdAvailableOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<bool>()() = lp::SimdAvailable();
  }
};

// Which path the matmul kernels would take with impl_: the same lp::ResolveImpl they call.
class ResolveImplOp : public OpKernel {
 public:
  explicit ResolveImplOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("impl", &impl_));
  }
  void Compute(OpKernelContext* ctx) override {
    bool simd = false;
    OP_REQUIRES_OK(ctx, lp::ResolveImpl(impl_, &simd));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<bool>()() = simd;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &out));
    out->scalar<bool>()() = lp::SimdAllowedByEnv();
  }

 private:
  std::string impl_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(
    Name("LowprecEncode").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    EncodeOp<float>);
REGISTER_KERNEL_BUILDER(
    Name("LowprecEncode").Device(tensorflow::DEVICE_CPU).TypeConstraint<Eigen::half>("T"),
    EncodeOp<Eigen::half>);
REGISTER_KERNEL_BUILDER(
    Name("LowprecEncode").Device(tensorflow::DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("T"),
    EncodeOp<tensorflow::bfloat16>);
REGISTER_KERNEL_BUILDER(Name("LowprecMatMulAccum").Device(tensorflow::DEVICE_CPU), MatMulOp<false>);
REGISTER_KERNEL_BUILDER(Name("LowprecMatMul").Device(tensorflow::DEVICE_CPU), MatMulOp<true>);
REGISTER_KERNEL_BUILDER(Name("LowprecSimdAvailable").Device(tensorflow::DEVICE_CPU), SimdAvailableOp);
REGISTER_KERNEL_BUILDER(Name("LowprecResolveImpl").Device(tensorflow::DEVICE_CPU), ResolveImplOp);

}  // namespace tf_nmt
