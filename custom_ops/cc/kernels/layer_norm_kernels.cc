// CPU kernels for FusedLayerNorm and its gradient: layer normalisation over the last axis.
//
// Keras's LayerNormalization with epsilon below 1.001e-5 (the Transformer's 1e-6) does not take
// its fused_batch_norm path: it runs tf.nn.moments and tf.nn.batch_normalization, about eight
// element-wise ops forward and twice that backward over each [rows, d_model] activation, plus two
// casts per norm under mixed bfloat16. Here a row (d_model floats, in L1) is read twice and written
// once forward, and read three times and written once backward.
//
// Rows are split over TF's intra-op threads in blocks of kRows. dgamma and dbeta are summed per
// block, then the blocks are added in order, so results do not depend on the thread count. On
// CPUs with AVX-512 (F, DQ, BW, VL) rows run 16 lanes at a time, on CPUs with AVX2 and FMA 8
// lanes, elsewhere a scalar loop computes the same formulas (summation order differs);
// $TF_NMT_LAYER_NORM_ISA (scalar, avx2 or avx512) caps the width, for tests and comparisons.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/work_sharder.h"
#include "bf16_simd.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

namespace {

constexpr int64_t kRows = 32;  // rows per work unit and per dgamma/dbeta partial sum

// The element type a SIMD loop reads: float, or bfloat16's raw bits.
template <typename T>
using Raw = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;

constexpr char kIsaEnv[] = "TF_NMT_LAYER_NORM_ISA";  // caps the row loops (ChooseSimdIsa)

// ---- scalar loops ---------------------------------------------------------------------------

template <typename T>
void ForwardRowScalar(const T* x, const float* gamma, const float* beta, T* y, int64_t d,
                      float epsilon, float* mean_out, float* rstd_out) {
  float sum = 0.0f;
  for (int64_t c = 0; c < d; ++c) sum += static_cast<float>(x[c]);
  const float mean = sum / static_cast<float>(d);
  float sq = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    const float diff = static_cast<float>(x[c]) - mean;
    sq += diff * diff;
  }
  const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(d) + epsilon);
  for (int64_t c = 0; c < d; ++c) {
    y[c] = static_cast<T>((static_cast<float>(x[c]) - mean) * rstd * gamma[c] + beta[c]);
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

template <typename T>
void BackwardRowScalar(const T* dy, const T* x, const float* gamma, float mean, float rstd,
                       T* dx, int64_t d, float* dgamma, float* dbeta) {
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    const float xhat = (static_cast<float>(x[c]) - mean) * rstd;
    const float up = static_cast<float>(dy[c]);
    const float g = up * gamma[c];
    sum_g += g;
    sum_gx += g * xhat;
    dgamma[c] += up * xhat;
    dbeta[c] += up;
  }
  const float a = sum_g / static_cast<float>(d), b = sum_gx / static_cast<float>(d);
  for (int64_t c = 0; c < d; ++c) {
    const float xhat = (static_cast<float>(x[c]) - mean) * rstd;
    const float g = static_cast<float>(dy[c]) * gamma[c];
    dx[c] = static_cast<T>(rstd * (g - a - xhat * b));
  }
}

// ---- AVX-512 loops ---------------------------------------------------------------------------

#if TF_NMT_BF16_SIMD_AVAILABLE
// Lanes of the chunk starting at column c of a row of d.
TF_NMT_AVX512 inline __mmask16 Valid(int64_t c, int64_t d) {
  const int64_t left = d - c;
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

template <typename R>
TF_NMT_AVX512 void ForwardRowSimd(const R* x, const float* gamma, const float* beta, R* y,
                                  int64_t d, float epsilon, float* mean_out, float* rstd_out) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) acc = _mm512_add_ps(acc, LoadAsFloat(x + c, Valid(c, d)));
  const float mean = _mm512_reduce_add_ps(acc) / static_cast<float>(d);
  const __m512 vmean = _mm512_set1_ps(mean);
  acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = Valid(c, d);
    const __m512 diff = _mm512_maskz_sub_ps(valid, LoadAsFloat(x + c, valid), vmean);
    acc = _mm512_fmadd_ps(diff, diff, acc);
  }
  const float rstd = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / static_cast<float>(d) + epsilon);
  const __m512 vrstd = _mm512_set1_ps(rstd);
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = Valid(c, d);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(LoadAsFloat(x + c, valid), vmean), vrstd);
    const __m512 out = _mm512_fmadd_ps(xhat, _mm512_maskz_loadu_ps(valid, gamma + c),
                                       _mm512_maskz_loadu_ps(valid, beta + c));
    StoreFromFloat(y + c, out, valid);
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

template <typename R>
TF_NMT_AVX512 void BackwardRowSimd(const R* dy, const R* x, const float* gamma, float mean,
                                   float rstd, R* dx, int64_t d, float* dgamma, float* dbeta) {
  const __m512 vmean = _mm512_set1_ps(mean), vrstd = _mm512_set1_ps(rstd);
  __m512 acc_g = _mm512_setzero_ps(), acc_gx = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = Valid(c, d);
    const __m512 xhat =
        _mm512_maskz_mul_ps(valid, _mm512_sub_ps(LoadAsFloat(x + c, valid), vmean), vrstd);
    const __m512 up = LoadAsFloat(dy + c, valid);
    const __m512 g = _mm512_mul_ps(up, _mm512_maskz_loadu_ps(valid, gamma + c));
    acc_g = _mm512_add_ps(acc_g, g);
    acc_gx = _mm512_fmadd_ps(g, xhat, acc_gx);
    _mm512_mask_storeu_ps(dgamma + c, valid,
                          _mm512_fmadd_ps(up, xhat, _mm512_maskz_loadu_ps(valid, dgamma + c)));
    _mm512_mask_storeu_ps(dbeta + c, valid,
                          _mm512_add_ps(up, _mm512_maskz_loadu_ps(valid, dbeta + c)));
  }
  const __m512 va = _mm512_set1_ps(_mm512_reduce_add_ps(acc_g) / static_cast<float>(d));
  const __m512 vb = _mm512_set1_ps(_mm512_reduce_add_ps(acc_gx) / static_cast<float>(d));
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = Valid(c, d);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(LoadAsFloat(x + c, valid), vmean), vrstd);
    const __m512 g =
        _mm512_mul_ps(LoadAsFloat(dy + c, valid), _mm512_maskz_loadu_ps(valid, gamma + c));
    // rstd * (g - a - xhat * b)
    const __m512 inner = _mm512_sub_ps(_mm512_sub_ps(g, va), _mm512_mul_ps(xhat, vb));
    StoreFromFloat(dx + c, _mm512_mul_ps(vrstd, inner), valid);
  }
}

// ---- AVX2 loops: the AVX-512 loops' arithmetic, 8 lanes ----------------------------------------

template <typename R>
TF_NMT_AVX2 void ForwardRowAvx2(const R* x, const float* gamma, const float* beta, R* y,
                                int64_t d, float epsilon, float* mean_out, float* rstd_out) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += 8) acc = _mm256_add_ps(acc, LoadAsFloat8(x + c, d - c));
  const float mean = HorizontalSum8(acc) / static_cast<float>(d);
  const __m256 vmean = _mm256_set1_ps(mean);
  acc = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += 8) {
    const __m256 diff =
        _mm256_and_ps(_mm256_sub_ps(LoadAsFloat8(x + c, d - c), vmean), LaneMask8(d - c));
    acc = _mm256_fmadd_ps(diff, diff, acc);
  }
  const float rstd = 1.0f / std::sqrt(HorizontalSum8(acc) / static_cast<float>(d) + epsilon);
  const __m256 vrstd = _mm256_set1_ps(rstd);
  for (int64_t c = 0; c < d; c += 8) {
    const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(LoadAsFloat8(x + c, d - c), vmean), vrstd);
    const __m256 out =
        _mm256_fmadd_ps(xhat, LoadAsFloat8(gamma + c, d - c), LoadAsFloat8(beta + c, d - c));
    StoreFromFloat8(y + c, out, d - c);
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

// Lanes past the row read 0 for dy and gamma, so they add nothing to the sums.
template <typename R>
TF_NMT_AVX2 void BackwardRowAvx2(const R* dy, const R* x, const float* gamma, float mean,
                                 float rstd, R* dx, int64_t d, float* dgamma, float* dbeta) {
  const __m256 vmean = _mm256_set1_ps(mean), vrstd = _mm256_set1_ps(rstd);
  __m256 acc_g = _mm256_setzero_ps(), acc_gx = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += 8) {
    const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(LoadAsFloat8(x + c, d - c), vmean), vrstd);
    const __m256 up = LoadAsFloat8(dy + c, d - c);
    const __m256 g = _mm256_mul_ps(up, LoadAsFloat8(gamma + c, d - c));
    acc_g = _mm256_add_ps(acc_g, g);
    acc_gx = _mm256_fmadd_ps(g, xhat, acc_gx);
    StoreFromFloat8(dgamma + c, _mm256_fmadd_ps(up, xhat, LoadAsFloat8(dgamma + c, d - c)), d - c);
    StoreFromFloat8(dbeta + c, _mm256_add_ps(up, LoadAsFloat8(dbeta + c, d - c)), d - c);
  }
  const __m256 va = _mm256_set1_ps(HorizontalSum8(acc_g) / static_cast<float>(d));
  const __m256 vb = _mm256_set1_ps(HorizontalSum8(acc_gx) / static_cast<float>(d));
  for (int64_t c = 0; c < d; c += 8) {
    const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(LoadAsFloat8(x + c, d - c), vmean), vrstd);
    const __m256 g = _mm256_mul_ps(LoadAsFloat8(dy + c, d - c), LoadAsFloat8(gamma + c, d - c));
    const __m256 inner = _mm256_sub_ps(_mm256_sub_ps(g, va), _mm256_mul_ps(xhat, vb));
    StoreFromFloat8(dx + c, _mm256_mul_ps(vrstd, inner), d - c);
  }
}
#endif

template <typename T>
void ForwardRows(const T* x, const float* gamma, const float* beta, T* y, int64_t r0, int64_t r1,
                 int64_t d, float epsilon, float* mean, float* rstd, SimdIsa isa) {
#if TF_NMT_BF16_SIMD_AVAILABLE
  const auto* xs = reinterpret_cast<const Raw<T>*>(x);
  auto* ys = reinterpret_cast<Raw<T>*>(y);
  if (isa == SimdIsa::kAvx512) {
    for (int64_t r = r0; r < r1; ++r) {
      ForwardRowSimd(xs + r * d, gamma, beta, ys + r * d, d, epsilon, mean + r, rstd + r);
    }
    return;
  }
  if (isa == SimdIsa::kAvx2) {
    for (int64_t r = r0; r < r1; ++r) {
      ForwardRowAvx2(xs + r * d, gamma, beta, ys + r * d, d, epsilon, mean + r, rstd + r);
    }
    return;
  }
#endif
  for (int64_t r = r0; r < r1; ++r) {
    ForwardRowScalar(x + r * d, gamma, beta, y + r * d, d, epsilon, mean + r, rstd + r);
  }
}

template <typename T>
void BackwardRows(const T* dy, const T* x, const float* gamma, const float* mean,
                  const float* rstd, T* dx, int64_t r0, int64_t r1, int64_t d, float* dgamma,
                  float* dbeta, SimdIsa isa) {
#if TF_NMT_BF16_SIMD_AVAILABLE
  const auto* dys = reinterpret_cast<const Raw<T>*>(dy);
  const auto* xs = reinterpret_cast<const Raw<T>*>(x);
  auto* dxs = reinterpret_cast<Raw<T>*>(dx);
  if (isa == SimdIsa::kAvx512) {
    for (int64_t r = r0; r < r1; ++r) {
      BackwardRowSimd(dys + r * d, xs + r * d, gamma, mean[r], rstd[r], dxs + r * d, d, dgamma,
                      dbeta);
    }
    return;
  }
  if (isa == SimdIsa::kAvx2) {
    for (int64_t r = r0; r < r1; ++r) {
      BackwardRowAvx2(dys + r * d, xs + r * d, gamma, mean[r], rstd[r], dxs + r * d, d, dgamma,
                      dbeta);
    }
    return;
  }
#endif
  for (int64_t r = r0; r < r1; ++r) {
    BackwardRowScalar(dy + r * d, x + r * d, gamma, mean[r], rstd[r], dx + r * d, d, dgamma,
                      dbeta);
  }
}

// rows x d view of a tensor of rank >= 1 whose last dimension is d; checks gamma/beta-like
// parameters against d.
tensorflow::Status CheckParams(const Tensor& x, std::initializer_list<const Tensor*> params,
                               int64_t* rows, int64_t* d) {
  if (x.dims() < 1) return errors::InvalidArgument("x must have rank >= 1, got a scalar");
  *d = x.dim_size(x.dims() - 1);
  if (*d == 0) return errors::InvalidArgument("x's last dimension must not be 0");
  *rows = x.NumElements() / *d;
  for (const Tensor* p : params) {
    if (p->dims() != 1 || p->dim_size(0) != *d) {
      return errors::InvalidArgument("gamma and beta must have shape [", *d,
                                     "] (x's last dimension), got ", p->shape().DebugString());
    }
  }
  return absl::OkStatus();
}

void ShardRows(OpKernelContext* ctx, int64_t rows, int64_t d,
               const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t blocks = (rows + kRows - 1) / kRows;
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  tensorflow::Shard(workers->num_threads, workers->workers, blocks, kRows * d * 8, fn);
}

}  // namespace

template <typename T>
class FusedLayerNormOp : public OpKernel {
 public:
  explicit FusedLayerNormOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
    OP_REQUIRES(ctx, epsilon_ > 0.0f && std::isfinite(epsilon_),
                errors::InvalidArgument("epsilon must be positive, got ", epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& gamma = ctx->input(1);
    const Tensor& beta = ctx->input(2);
    int64_t rows = 0, d = 0;
    OP_REQUIRES_OK(ctx, CheckParams(x, {&gamma, &beta}, &rows, &d));
    TensorShape row_shape = x.shape();
    row_shape.RemoveLastDims(1);
    Tensor *y = nullptr, *mean = nullptr, *rstd = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, row_shape, &mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, row_shape, &rstd));
    if (rows == 0) return;
    const T* xs = x.flat<T>().data();
    const float* g = gamma.flat<float>().data();
    const float* b = beta.flat<float>().data();
    T* ys = y->flat<T>().data();
    float* means = mean->flat<float>().data();
    float* rstds = rstd->flat<float>().data();
    SimdIsa isa;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    const float eps = epsilon_;
    ShardRows(ctx, rows, d, [&](int64_t b0, int64_t b1) {
      ForwardRows<T>(xs, g, b, ys, b0 * kRows, std::min(rows, b1 * kRows), d, eps, means, rstds,
                     isa);
    });
  }

 private:
  float epsilon_ = 1e-6f;
};

template <typename T>
class FusedLayerNormGradOp : public OpKernel {
 public:
  explicit FusedLayerNormGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    const Tensor& x = ctx->input(1);
    const Tensor& gamma = ctx->input(2);
    const Tensor& mean = ctx->input(3);
    const Tensor& rstd = ctx->input(4);
    int64_t rows = 0, d = 0;
    OP_REQUIRES_OK(ctx, CheckParams(x, {&gamma}, &rows, &d));
    OP_REQUIRES(ctx, dy.shape() == x.shape(),
                errors::InvalidArgument("dy and x must have the same shape, got ",
                                        dy.shape().DebugString(), " and ",
                                        x.shape().DebugString()));
    OP_REQUIRES(ctx, mean.NumElements() == rows && rstd.NumElements() == rows,
                errors::InvalidArgument("mean and rstd must hold one value per row (", rows,
                                        "), got ", mean.NumElements(), " and ",
                                        rstd.NumElements()));
    Tensor *dx = nullptr, *dgamma = nullptr, *dbeta = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, gamma.shape(), &dgamma));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, gamma.shape(), &dbeta));
    float* dg = dgamma->flat<float>().data();
    float* db = dbeta->flat<float>().data();
    std::fill(dg, dg + d, 0.0f);
    std::fill(db, db + d, 0.0f);
    if (rows == 0) return;
    // One partial (dgamma, dbeta) per block of kRows rows, added in block order below.
    const int64_t blocks = (rows + kRows - 1) / kRows;
    Tensor partial;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(tensorflow::DT_FLOAT, TensorShape({blocks, 2, d}),
                                           &partial));
    float* parts = partial.flat<float>().data();
    std::fill(parts, parts + blocks * 2 * d, 0.0f);
    const T* dys = dy.flat<T>().data();
    const T* xs = x.flat<T>().data();
    const float* g = gamma.flat<float>().data();
    const float* means = mean.flat<float>().data();
    const float* rstds = rstd.flat<float>().data();
    T* dxs = dx->flat<T>().data();
    SimdIsa isa;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    ShardRows(ctx, rows, d, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        float* part = parts + blk * 2 * d;
        BackwardRows<T>(dys, xs, g, means, rstds, dxs, blk * kRows,
                        std::min(rows, (blk + 1) * kRows), d, part, part + d, isa);
      }
    });
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const float* part = parts + blk * 2 * d;
      for (int64_t c = 0; c < d; ++c) {
        dg[c] += part[c];
        db[c] += part[d + c];
      }
    }
  }
};

#define TF_NMT_REGISTER_LAYER_NORM(T)                                                   \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("FusedLayerNorm").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),     \
      FusedLayerNormOp<T>);                                                             \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("FusedLayerNormGrad").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      FusedLayerNormGradOp<T>);
TF_NMT_REGISTER_LAYER_NORM(float)
TF_NMT_REGISTER_LAYER_NORM(Eigen::bfloat16)
#undef TF_NMT_REGISTER_LAYER_NORM

}  // namespace tf_nmt
