// CPU kernels for SmoothedSoftmaxXent and its gradient: the training loss over [N, V] logits in
// one pass each way (the TF composition makes about eight: the sparse cross-entropy kernel, the
// mean for the smoothing term, and the gradient's multiply, subtract and scatter); and RowArgmax.
//
// Rows are split over TF's intra-op threads. The row loops come in three widths, chosen per call
// (ChooseSimdIsa): 16 lanes where the CPU has AVX-512 (F, DQ, BW, VL: every AVX-512 Xeon), 8 lanes
// where it has AVX2 and FMA (earlier Xeons, AMD Zen 1-3), and a scalar loop with std::exp
// elsewhere. $TF_NMT_XENT_ISA (scalar, avx2 or avx512) caps the width, for tests and comparisons.
// The library itself is built for baseline x86-64: the wide loops carry per-function target
// attributes. Their exp is a polynomial (range reduction by ln 2, a degree-7 polynomial, relative
// error about 2e-7), so all widths give the same function within float rounding; the tests compare
// them with each other and with TensorFlow's kernels.
//
// Logits may be float32 or bfloat16 (mixed precision: the model's projection then hands its
// bfloat16 product straight to the loss instead of casting [N, V] to float32 and the gradient
// back). Either way every value is widened to float and computed in float; a bfloat16 gradient
// is rounded once, when stored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include <type_traits>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/util/work_sharder.h"
#include "bf16_simd.h"

#if TF_NMT_BF16_SIMD_AVAILABLE
#define TF_NMT_XENT_X86 1
#define TF_NMT_XENT_SIMD TF_NMT_AVX512
#define TF_NMT_XENT_SIMD_INLINE TF_NMT_XENT_SIMD __attribute__((always_inline)) inline
#define TF_NMT_XENT_AVX2_INLINE TF_NMT_AVX2 __attribute__((always_inline)) inline
#else
#define TF_NMT_XENT_X86 0
#endif

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

namespace {

struct RowStats {
  float max, sum, sum_exp;  // max(x), sum(x), sum(exp(x - max))
};

// The element type the SIMD loops read: float, or bfloat16's raw bits.
template <typename T>
using Raw = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;

// ---- scalar path ----

template <typename T>
RowStats StatsScalar(const T* x, int64_t v) {
  float m = -std::numeric_limits<float>::infinity(), s = 0.0f;
  for (int64_t j = 0; j < v; ++j) {
    const float xj = static_cast<float>(x[j]);
    m = std::max(m, xj);
    s += xj;
  }
  float e = 0.0f;
  for (int64_t j = 0; j < v; ++j) e += std::exp(static_cast<float>(x[j]) - m);
  return {m, s, e};
}

template <typename T>
void GradScalar(const T* x, int64_t v, float lse, float up, float shift, T* g) {
  for (int64_t j = 0; j < v; ++j) {
    g[j] = static_cast<T>((std::exp(static_cast<float>(x[j]) - lse) - shift) * up);
  }
}

// ---- AVX-512 path ----

#if TF_NMT_XENT_X86
// exp(x) for x in float range: n = round(x / ln2), r = x - n ln2 (two-part ln2), e^r by a
// Taylor-like polynomial with coefficients fitted for |r| <= ln2 / 2, then 2^n by scalef.
TF_NMT_XENT_SIMD_INLINE __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // exp underflows to 0 below about -103.9
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

TF_NMT_XENT_SIMD_INLINE __mmask16 TailMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF)
                    : static_cast<__mmask16>((1u << left) - 1u);
}

template <typename R>
TF_NMT_XENT_SIMD RowStats StatsSimd(const R* x, int64_t v) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf, vsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < v; j += 16) {
    const __mmask16 k = TailMask(v - j);
    const __m512 xj = LoadAsFloat(x + j, k);  // 0 in the lanes past the row
    vmax = _mm512_max_ps(vmax, _mm512_mask_mov_ps(neg_inf, k, xj));
    vsum = _mm512_add_ps(vsum, xj);
  }
  const float m = _mm512_reduce_max_ps(vmax);
  const __m512 vm = _mm512_set1_ps(m);
  __m512 ve = _mm512_setzero_ps();
  for (int64_t j = 0; j < v; j += 16) {
    const __mmask16 k = TailMask(v - j);
    const __m512 e = Exp16(_mm512_sub_ps(LoadAsFloat(x + j, k), vm));
    ve = _mm512_add_ps(ve, _mm512_maskz_mov_ps(k, e));
  }
  return {m, _mm512_reduce_add_ps(vsum), _mm512_reduce_add_ps(ve)};
}

template <typename R>
TF_NMT_XENT_SIMD void GradSimd(const R* x, int64_t v, float lse, float up, float shift, R* g) {
  const __m512 vl = _mm512_set1_ps(lse), vs = _mm512_set1_ps(shift), vu = _mm512_set1_ps(up);
  for (int64_t j = 0; j < v; j += 16) {
    const __mmask16 k = TailMask(v - j);
    const __m512 e = Exp16(_mm512_sub_ps(LoadAsFloat(x + j, k), vl));
    StoreFromFloat(g + j, _mm512_mul_ps(_mm512_sub_ps(e, vs), vu), k);
  }
}

// The first index of the row's maximum: per lane the first strictly greater value, then the
// smallest index among the lanes that hold the maximum.
template <typename R>
TF_NMT_XENT_SIMD int32_t ArgmaxSimd(const R* x, int64_t v) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 vmax = neg_inf;
  __m512i vidx = _mm512_setzero_si512();
  for (int64_t j = 0; j < v; j += 16) {
    const __mmask16 k = TailMask(v - j);
    const __m512 xj = _mm512_mask_mov_ps(neg_inf, k, LoadAsFloat(x + j, k));
    const __mmask16 greater = _mm512_cmp_ps_mask(xj, vmax, _CMP_GT_OQ);
    vmax = _mm512_mask_mov_ps(vmax, greater, xj);
    vidx = _mm512_mask_mov_epi32(
        vidx, greater, _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(j))));
  }
  const __mmask16 top = _mm512_cmp_ps_mask(vmax, _mm512_set1_ps(_mm512_reduce_max_ps(vmax)),
                                           _CMP_EQ_OQ);
  return top ? _mm512_mask_reduce_min_epi32(top, vidx) : 0;
}

// ---- AVX2 path: the same loops, 8 lanes ----

// Exp16's method on 8 lanes; 2^n (n in [-150, 128]) as the product of two powers of two built in
// the exponent field, since AVX2 has no scalef.
TF_NMT_XENT_AVX2_INLINE __m256 Exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-104.0f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);  // n = half + rest, both in [-75, 64]
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, a), b);
}

template <typename R>
TF_NMT_AVX2 RowStats StatsAvx2(const R* x, int64_t v) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf, vsum = _mm256_setzero_ps();
  for (int64_t j = 0; j < v; j += 8) {
    const __m256 xj = LoadAsFloat8(x + j, v - j);  // 0 in the lanes past the row
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, xj, LaneMask8(v - j)));
    vsum = _mm256_add_ps(vsum, xj);
  }
  const float m = HorizontalMax8(vmax);
  const __m256 vm = _mm256_set1_ps(m);
  __m256 ve = _mm256_setzero_ps();
  for (int64_t j = 0; j < v; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(LoadAsFloat8(x + j, v - j), vm));
    ve = _mm256_add_ps(ve, _mm256_and_ps(e, LaneMask8(v - j)));
  }
  return {m, HorizontalSum8(vsum), HorizontalSum8(ve)};
}

template <typename R>
TF_NMT_AVX2 void GradAvx2(const R* x, int64_t v, float lse, float up, float shift, R* g) {
  const __m256 vl = _mm256_set1_ps(lse), vs = _mm256_set1_ps(shift), vu = _mm256_set1_ps(up);
  for (int64_t j = 0; j < v; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(LoadAsFloat8(x + j, v - j), vl));
    StoreFromFloat8(g + j, _mm256_mul_ps(_mm256_sub_ps(e, vs), vu), v - j);
  }
}

// ArgmaxSimd on 8 lanes.
template <typename R>
TF_NMT_AVX2 int32_t ArgmaxAvx2(const R* x, int64_t v) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 vmax = neg_inf;
  __m256i vidx = _mm256_setzero_si256();
  for (int64_t j = 0; j < v; j += 8) {
    const __m256 xj = _mm256_blendv_ps(neg_inf, LoadAsFloat8(x + j, v - j), LaneMask8(v - j));
    const __m256 greater = _mm256_cmp_ps(xj, vmax, _CMP_GT_OQ);
    vmax = _mm256_blendv_ps(vmax, xj, greater);
    vidx = _mm256_blendv_epi8(
        vidx, _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(j))),
        _mm256_castps_si256(greater));
  }
  const float m = HorizontalMax8(vmax);
  alignas(32) float maxes[8];
  alignas(32) int32_t index[8];
  _mm256_store_ps(maxes, vmax);
  _mm256_store_si256(reinterpret_cast<__m256i*>(index), vidx);
  int32_t best = std::numeric_limits<int32_t>::max();
  for (int k = 0; k < 8; ++k) {
    if (maxes[k] == m && index[k] < best) best = index[k];
  }
  return best == std::numeric_limits<int32_t>::max() ? 0 : best;
}
#endif

template <typename T>
int32_t ArgmaxScalar(const T* x, int64_t v) {
  float best = static_cast<float>(x[0]);
  int32_t at = 0;
  for (int64_t j = 1; j < v; ++j) {
    const float xj = static_cast<float>(x[j]);
    if (xj > best) {
      best = xj;
      at = static_cast<int32_t>(j);
    }
  }
  return at;
}

constexpr char kIsaEnv[] = "TF_NMT_XENT_ISA";  // caps the row loops (ChooseSimdIsa)

template <typename T>
RowStats Stats(const T* row, int64_t v, SimdIsa isa) {
#if TF_NMT_XENT_X86
  const auto* raw = reinterpret_cast<const Raw<T>*>(row);
  if (isa == SimdIsa::kAvx512) return StatsSimd(raw, v);
  if (isa == SimdIsa::kAvx2) return StatsAvx2(raw, v);
#endif
  return StatsScalar(row, v);
}

template <typename T>
void Grad(const T* row, int64_t v, float lse, float up, float shift, T* out, SimdIsa isa) {
#if TF_NMT_XENT_X86
  const auto* raw = reinterpret_cast<const Raw<T>*>(row);
  auto* raw_out = reinterpret_cast<Raw<T>*>(out);
  if (isa == SimdIsa::kAvx512) {
    GradSimd(raw, v, lse, up, shift, raw_out);
    return;
  }
  if (isa == SimdIsa::kAvx2) {
    GradAvx2(raw, v, lse, up, shift, raw_out);
    return;
  }
#endif
  GradScalar(row, v, lse, up, shift, out);
}

// Runs fn(begin_row, end_row) over [0, rows) on the kernel's intra-op threads.
void ForRows(OpKernelContext* ctx, int64_t rows, int64_t cost_per_row,
             const std::function<void(int64_t, int64_t)>& fn) {
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  tensorflow::Shard(workers->num_threads, workers->workers, rows, cost_per_row, fn);
}

// Checks logits [N, V] (V >= 1) and labels [N] in [0, V).
absl::Status CheckInputs(const Tensor& logits, const Tensor& labels) {
  if (!TensorShapeUtils::IsMatrix(logits.shape()) || logits.dim_size(1) < 1) {
    return errors::InvalidArgument("logits must be [N, V] with V >= 1, got shape ",
                                   logits.shape().DebugString());
  }
  if (!TensorShapeUtils::IsVector(labels.shape()) || labels.dim_size(0) != logits.dim_size(0)) {
    return errors::InvalidArgument("labels must be [N] with N = ", logits.dim_size(0),
                                   " (the logits' rows), got shape ", labels.shape().DebugString());
  }
  const int64_t v = logits.dim_size(1);
  auto y = labels.flat<int32_t>();
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y(i) < 0 || y(i) >= v) {
      return errors::InvalidArgument("label ", y(i), " at row ", i, " is outside [0, ", v, ")");
    }
  }
  return absl::OkStatus();
}

absl::Status SmoothingAttr(OpKernelConstruction* ctx, float* smoothing) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("smoothing", smoothing));
  if (!(*smoothing >= 0.0f && *smoothing < 1.0f)) {
    return errors::InvalidArgument("smoothing must be in [0, 1), got ", *smoothing);
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
class SmoothedSoftmaxXentOp : public OpKernel {
 public:
  explicit SmoothedSoftmaxXentOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, SmoothingAttr(ctx, &smoothing_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckInputs(logits, labels));
    const int64_t n = logits.dim_size(0), v = logits.dim_size(1);
    Tensor *loss_t = nullptr, *lse_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &loss_t));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &lse_t));
    const T* x = logits.flat<T>().data();
    const int32_t* y = labels.flat<int32_t>().data();
    float* loss = loss_t->flat<float>().data();
    float* lse_out = lse_t->flat<float>().data();
    const float eps = smoothing_;
    SimdIsa isa;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    ForRows(ctx, n, v * 12, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* row = x + i * v;
        const RowStats st = Stats(row, v, isa);
        // A NaN or infinite logit makes the sum non-finite (the SIMD max and exp may drop a NaN
        // lane): then the row's log-sum-exp, loss and gradient are NaN, so training sees it.
        const float lse = std::isfinite(st.sum) ? st.max + std::log(st.sum_exp)
                                                : std::numeric_limits<float>::quiet_NaN();
        lse_out[i] = lse;
        loss[i] = lse - (1.0f - eps) * static_cast<float>(row[y[i]]) -
                  eps * (st.sum / static_cast<float>(v));
      }
    });
  }

 private:
  float smoothing_ = 0.0f;
};

template <typename T>
class SmoothedSoftmaxXentGradOp : public OpKernel {
 public:
  explicit SmoothedSoftmaxXentGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, SmoothingAttr(ctx, &smoothing_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    const Tensor& lse_t = ctx->input(2);
    const Tensor& up_t = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckInputs(logits, labels));
    const int64_t n = logits.dim_size(0), v = logits.dim_size(1);
    for (const Tensor* t : {&lse_t, &up_t}) {
      OP_REQUIRES(ctx, TensorShapeUtils::IsVector(t->shape()) && t->dim_size(0) == n,
                  errors::InvalidArgument("logsumexp and upstream must be [N] with N = ", n,
                                          ", got shape ", t->shape().DebugString()));
    }
    Tensor* grad_t = nullptr;
    // The logits are not needed after this op in training: write the gradient over them when
    // TF can hand over their buffer.
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, logits.shape(), &grad_t));
    const T* x = logits.flat<T>().data();
    const int32_t* y = labels.flat<int32_t>().data();
    const float* lse = lse_t.flat<float>().data();
    const float* up = up_t.flat<float>().data();
    T* g = grad_t->flat<T>().data();
    const float eps = smoothing_, shift = smoothing_ / static_cast<float>(v);
    SimdIsa isa;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    ForRows(ctx, n, v * 10, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T* out = g + i * v;
        if (!std::isfinite(lse[i])) {  // non-finite logits: let the NaN reach the weights
          std::fill(out, out + v, static_cast<T>(std::numeric_limits<float>::quiet_NaN()));
          continue;
        }
        if (up[i] == 0.0f) {  // padding rows: weight 0
          std::memset(static_cast<void*>(out), 0, sizeof(T) * v);
          continue;
        }
        const T* row = x + i * v;
        // The label's entry, read before an in-place write replaces the row: softmax - q there
        // is computed in float and rounded once.
        const float at_label = static_cast<float>(row[y[i]]);
        Grad(row, v, lse[i], up[i], shift, out, isa);
        out[y[i]] = static_cast<T>((std::exp(at_label - lse[i]) - shift) * up[i] -
                                   (1.0f - eps) * up[i]);
      }
    });
  }

 private:
  float smoothing_ = 0.0f;
};

template <typename T>
class RowArgmaxOp : public OpKernel {
 public:
  explicit RowArgmaxOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(logits.shape()) && logits.dim_size(1) >= 1,
                errors::InvalidArgument("logits must be [N, V] with V >= 1, got shape ",
                                        logits.shape().DebugString()));
    OP_REQUIRES(ctx, logits.dim_size(1) <= std::numeric_limits<int32_t>::max(),
                errors::InvalidArgument("V must fit in int32, got ", logits.dim_size(1)));
    const int64_t n = logits.dim_size(0), v = logits.dim_size(1);
    Tensor* index_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &index_t));
    const T* x = logits.flat<T>().data();
    int32_t* index = index_t->flat<int32_t>().data();
    SimdIsa isa;
    OP_REQUIRES_OK(ctx, ChooseSimdIsa(kIsaEnv, &isa));
    ForRows(ctx, n, v * 2, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* row = x + i * v;
#if TF_NMT_XENT_X86
        if (isa == SimdIsa::kAvx512) {
          index[i] = ArgmaxSimd(reinterpret_cast<const Raw<T>*>(row), v);
          continue;
        }
        if (isa == SimdIsa::kAvx2) {
          index[i] = ArgmaxAvx2(reinterpret_cast<const Raw<T>*>(row), v);
          continue;
        }
#endif
        index[i] = ArgmaxScalar(row, v);
      }
    });
  }
};

#define TF_NMT_REGISTER_XENT(T)                                                               \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("SmoothedSoftmaxXent").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),      \
      SmoothedSoftmaxXentOp<T>);                                                              \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name("SmoothedSoftmaxXentGrad").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),  \
      SmoothedSoftmaxXentGradOp<T>);                                                          \
  REGISTER_KERNEL_BUILDER(Name("RowArgmax").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
                          RowArgmaxOp<T>);
TF_NMT_REGISTER_XENT(float)
TF_NMT_REGISTER_XENT(Eigen::bfloat16)
#undef TF_NMT_REGISTER_XENT

}  // namespace tf_nmt
