// Table 7.5 microbenchmark ops (thesis section 7.3.5): LowprecBenchDot and LowprecBenchMatMul
// time the log-space kernels and their int8 / fp32 baselines in C++ loops on one thread, so
// that TF's per-op cost does not swamp a 128-element dot product.
//
// Experiment code, not part of the tf-nmt ops library: experiments/lowprec/bench_ops.py compiles
// this file, with custom_ops/cc/kernels/lowprec_dot.cc, into a library of its own
// (build/lowprec_bench/_lowprec_bench_ops.so) on first use. The kernels timed here are the
// production templates of lowprec_dot_inl.h, instantiated in this file.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lowprec_dot.h"
#include "lowprec_dot_inl.h"
#include "lowprec_impl_attr.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {
namespace lowprec {
namespace {

using namespace internal;  // NOLINT: the kernel templates (Elem, Block, MatMul, ...)

// ---- timing loops (single thread, deterministic pseudo-random data, steady_clock) ----
//
// BenchDot: `pairs` independent dot products of length 128 (an L1-resident working set),
// repeated `reps` times; returns ns per dot product. BenchMatMul: out[M,N] = A[M,K] B[N,K]^T
// with B (the weights) packed once outside the timing; each timed call packs A from codes
// (except fp32) and writes float outputs (scaled for the integer methods); returns ns per call.
// *checksum receives a value depending on every result, so nothing can be optimised away.

#if TF_NMT_LOWPREC_X86

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

// ---- ops ----

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;
namespace errors = tensorflow::errors;

Status ReadPositive(const Tensor& t, const char* name, int64_t hi, int64_t* value) {
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return errors::InvalidArgument(name, " must be a scalar, got shape ", t.shape().DebugString());
  }
  *value = t.scalar<int64_t>()();
  if (*value < 1 || *value > hi) {
    return errors::InvalidArgument(name, " must be in [1, ", hi, "], got ", *value);
  }
  return tensorflow::OkStatus();
}

Method ParseMethod(const std::string& s) {
  if (s == "fp32") return Method::kFp32;
  if (s == "int8") return Method::kInt8;
  if (s == "shift16") return Method::kShift16;
  return Method::kLut8;
}

absl::Status ScalarInputsTwoScalarOutputs(InferenceContext* c) {
  ShapeHandle unused;
  for (int i = 0; i < c->num_inputs(); ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  }
  c->set_output(0, c->Scalar());
  c->set_output(1, c->Scalar());
  return absl::OkStatus();
}

class BenchDotOp : public OpKernel {
 public:
  explicit BenchDotOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string method;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("method", &method));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("impl", &impl_));
    method_ = ParseMethod(method);
  }

  void Compute(OpKernelContext* ctx) override {
    int64_t pairs = 0, reps = 0;
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(0), "pairs", 1 << 16, &pairs));
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(1), "reps", int64_t{1} << 40, &reps));
    bool simd = false;
    OP_REQUIRES_OK(ctx, ResolveImpl(impl_, &simd));
    double checksum = 0.0;
    const double ns = BenchDot(method_, pairs, reps, simd, &checksum);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<double>()() = ns;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &out));
    out->scalar<double>()() = checksum;
  }

 private:
  Method method_;
  std::string impl_;
};

class BenchMatMulOp : public OpKernel {
 public:
  explicit BenchMatMulOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string method;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("method", &method));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("impl", &impl_));
    method_ = ParseMethod(method);
  }

  void Compute(OpKernelContext* ctx) override {
    int64_t m = 0, k = 0, n = 0, reps = 0;
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(0), "m", 1 << 16, &m));
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(1), "k", kShift16MaxK, &k));
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(2), "n", 1 << 20, &n));
    OP_REQUIRES_OK(ctx, ReadPositive(ctx->input(3), "reps", int64_t{1} << 40, &reps));
    OP_REQUIRES(ctx, (m + n) * PaddedK(k) <= (int64_t{1} << 28) && m * n <= (int64_t{1} << 28),
                errors::InvalidArgument("benchmark matrices too large: ", m, "x", k, "x", n));
    bool simd = false;
    OP_REQUIRES_OK(ctx, ResolveImpl(impl_, &simd));
    double checksum = 0.0;
    const double ns = BenchMatMul(method_, m, k, n, reps, simd, &checksum);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<double>()() = ns;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &out));
    out->scalar<double>()() = checksum;
  }

 private:
  Method method_;
  std::string impl_;
};

constexpr char kMethodAttr[] = "method: {'fp32', 'int8', 'shift16', 'lut8'}";
constexpr char kImplAttr[] = "impl: {'auto', 'simd', 'scalar'} = 'auto'";

}  // namespace

REGISTER_OP("LowprecBenchDot")
    .Input("pairs: int64")
    .Input("reps: int64")
    .Output("ns_per_dot: double")
    .Output("checksum: double")
    .Attr(kMethodAttr)
    .Attr(kImplAttr)
    .SetIsStateful()
    .SetShapeFn(ScalarInputsTwoScalarOutputs)
    .Doc("ns per 128-element dot product (C++ timing loop, one thread).");

REGISTER_OP("LowprecBenchMatMul")
    .Input("m: int64")
    .Input("k: int64")
    .Input("n: int64")
    .Input("reps: int64")
    .Output("ns_per_matmul: double")
    .Output("checksum: double")
    .Attr(kMethodAttr)
    .Attr(kImplAttr)
    .SetIsStateful()
    .SetShapeFn(ScalarInputsTwoScalarOutputs)
    .Doc("ns per [M,K] x [K,N] matrix multiply (C++ timing loop, one thread, weights pre-packed).");

REGISTER_KERNEL_BUILDER(Name("LowprecBenchDot").Device(tensorflow::DEVICE_CPU), BenchDotOp);
REGISTER_KERNEL_BUILDER(Name("LowprecBenchMatMul").Device(tensorflow::DEVICE_CPU), BenchMatMulOp);

}  // namespace lowprec
}  // namespace tf_nmt
