// CPU kernels for GradDrop and GradDropGlobal: error-feedback gradient dropping.
//
// sum = gradient + residual (in T); entries with |sum| >= threshold are emitted as (flat index,
// value) pairs and zeroed in the new residual, everything else stays in the residual unchanged.
// Hence scatter(values) + new_residual == sum bit-exactly. One pass over memory after sampling.
// Layout of inputs/outputs (N tensors; N = 1 for GradDrop):
//   inputs  [gradients x N, residuals x N, drop_ratio, sample_fraction, seed]
//   outputs [indices x N, values x N, new_residuals x N, threshold]
#include <cmath>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <vector>

#include "grad_drop_threshold.h"
#include "parallel_blocks.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::DataTypeToEnum;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

constexpr int64_t kChunk = 1024;  // entries staged at once (divides kBlockSize)
constexpr int kGroup = 16;        // entries compared branch-free at once (divides kChunk)

inline bool Kept(float magnitude, float threshold) { return magnitude >= threshold; }

// Drops entries [begin, begin + n) of one tensor: writes their new residual to res and appends
// the kept (flat index, value) pairs. Reads gradient and residual before writing res, so res may
// be the residual input itself (forwarded).
template <typename T>
void DropChunk(const GradSpan<T>& s, T* res, int64_t begin, int64_t n, float threshold,
               std::vector<int64_t>* out_idx, std::vector<T>* out_val) {
  T sums[kChunk];
  const T* g = s.gradient + begin;
  const T* r = s.residual + begin;
  for (int64_t j = 0; j < n; ++j) sums[j] = g[j] + r[j];
  const T zero = static_cast<T>(0.0f);
  T* out = res + begin;
  int64_t j = 0;
  for (; j + kGroup <= n; j += kGroup) {
    int kept = 0;
    for (int q = 0; q < kGroup; ++q) {
      const bool keep = Kept(std::fabs(static_cast<float>(sums[j + q])), threshold);
      kept += keep;
      out[j + q] = keep ? zero : sums[j + q];
    }
    if (kept == 0) continue;
    for (int q = 0; q < kGroup; ++q) {
      if (Kept(std::fabs(static_cast<float>(sums[j + q])), threshold)) {
        out_idx->push_back(begin + j + q);
        out_val->push_back(sums[j + q]);
      }
    }
  }
  for (; j < n; ++j) {
    const bool keep = Kept(std::fabs(static_cast<float>(sums[j])), threshold);
    if (keep) {
      out_idx->push_back(begin + j);
      out_val->push_back(sums[j]);
    }
    out[j] = keep ? zero : sums[j];
  }
}

#if defined(__SSE2__)
// float on x86-64: four entries at a time; the keep mask comes out of the compare as bits, so
// kept entries are found with a count-trailing-zeros loop instead of a second scan. Same results
// as the generic version bit for bit (IEEE adds, NaN never kept, +0 written where kept).
template <>
void DropChunk<float>(const GradSpan<float>& s, float* res, int64_t begin, int64_t n,
                      float threshold, std::vector<int64_t>* out_idx,
                      std::vector<float>* out_val) {
  const float* g = s.gradient + begin;
  const float* r = s.residual + begin;
  float* out = res + begin;
  const __m128 thr = _mm_set1_ps(threshold);
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m128 sum = _mm_add_ps(_mm_loadu_ps(g + j), _mm_loadu_ps(r + j));
    const __m128 keep = _mm_cmpge_ps(_mm_and_ps(sum, abs_mask), thr);
    _mm_storeu_ps(out + j, _mm_andnot_ps(keep, sum));
    int mask = _mm_movemask_ps(keep);
    if (mask == 0) continue;
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, sum);
    while (mask != 0) {
      const int q = __builtin_ctz(mask);
      mask &= mask - 1;
      out_idx->push_back(begin + j + q);
      out_val->push_back(lanes[q]);
    }
  }
  for (; j < n; ++j) {
    const float sum = g[j] + r[j];
    const bool keep = Kept(std::fabs(sum), threshold);
    if (keep) {
      out_idx->push_back(begin + j);
      out_val->push_back(sum);
    }
    out[j] = keep ? 0.0f : sum;
  }
}
#endif  // __SSE2__

template <typename T>
class GradDropOp : public OpKernel {
 public:
  explicit GradDropOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    if (ctx->HasAttr("N")) OP_REQUIRES_OK(ctx, ctx->GetAttr("N", &num_tensors_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("exact_below", &exact_below_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("min_sample", &min_sample_));
  }

  void Compute(OpKernelContext* ctx) override {
    const int n = num_tensors_;
    ThresholdOptions opt;
    opt.exact_below = exact_below_;
    opt.min_sample = min_sample_;
    OP_REQUIRES_OK(ctx, ReadScalars(ctx, n, &opt));

    std::vector<GradSpan<T>> spans(n);
    for (int t = 0; t < n; ++t) {
      const Tensor& g = ctx->input(t);
      const Tensor& r = ctx->input(n + t);
      OP_REQUIRES(ctx, g.shape() == r.shape(),
                  errors::InvalidArgument("gradient and residual shapes differ (tensor ", t,
                                          "): ", g.shape().DebugString(), " vs ",
                                          r.shape().DebugString()));
      spans[t] = {g.flat<T>().data(), r.flat<T>().data(), g.NumElements()};
    }
    const float threshold = SelectThreshold<T>(ctx, spans, opt);

    std::vector<T*> residual(n);
    std::vector<std::pair<int, int64_t>> blocks;
    for (int t = 0; t < n; ++t) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({n + t}, 2 * n + t,
                                                                ctx->input(n + t).shape(), &out));
      residual[t] = out->flat<T>().data();
      for (int64_t b = 0; b < NumBlocks(spans[t].size); ++b) blocks.emplace_back(t, b);
    }
    // One pass over memory: new_residual = sum, or 0 where kept; kept (index, value) pairs go to
    // per-block buffers. Each chunk's sums are staged in a local buffer (so the compiler knows
    // nothing aliases it, even when the residual is updated in place) and compared in
    // branch-free groups of kGroup entries (vectorises); only groups that keep something are
    // scanned again to append their entries.
    std::vector<std::vector<int64_t>> block_idx(blocks.size());
    std::vector<std::vector<T>> block_val(blocks.size());
    ForEachBlock(ctx, blocks.size(), [&](int64_t k) {
      const auto [t, b] = blocks[k];
      const GradSpan<T>& s = spans[t];
      const int64_t lo = b * kBlockSize, hi = std::min(s.size, lo + kBlockSize);
      for (int64_t c = lo; c < hi; c += kChunk) {
        DropChunk(s, residual[t], c, std::min<int64_t>(kChunk, hi - c), threshold,
                  &block_idx[k], &block_val[k]);
      }
    });

    // Per-block output offsets (prefix sums within each tensor), then gather the buffers.
    std::vector<int64_t> starts(blocks.size(), 0), totals(n, 0);
    for (size_t k = 0; k < blocks.size(); ++k) {
      starts[k] = totals[blocks[k].first];
      totals[blocks[k].first] += static_cast<int64_t>(block_idx[k].size());
    }
    std::vector<tensorflow::int64*> indices(n);
    std::vector<T*> values(n);
    for (int t = 0; t < n; ++t) {
      Tensor* idx = nullptr;
      Tensor* val = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(t, TensorShape({totals[t]}), &idx));
      OP_REQUIRES_OK(ctx, ctx->allocate_output(n + t, TensorShape({totals[t]}), &val));
      indices[t] = idx->flat<tensorflow::int64>().data();
      values[t] = val->flat<T>().data();
    }
    ForEachBlock(ctx, blocks.size(), [&](int64_t k) {
      const int t = blocks[k].first;
      std::copy(block_idx[k].begin(), block_idx[k].end(), indices[t] + starts[k]);
      std::copy(block_val[k].begin(), block_val[k].end(), values[t] + starts[k]);
    });

    Tensor* thr = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3 * n, TensorShape({}), &thr));
    thr->scalar<float>()() = threshold;
  }

 private:
  static tensorflow::Status ReadScalars(OpKernelContext* ctx, int n, ThresholdOptions* opt) {
    const char* names[3] = {"drop_ratio", "sample_fraction", "seed"};
    for (int i = 0; i < 3; ++i) {
      if (!TensorShapeUtils::IsScalar(ctx->input(2 * n + i).shape())) {
        return errors::InvalidArgument(names[i], " must be a scalar, got shape ",
                                       ctx->input(2 * n + i).shape().DebugString());
      }
    }
    opt->drop_ratio = ctx->input(2 * n).scalar<float>()();
    opt->sample_fraction = ctx->input(2 * n + 1).scalar<float>()();
    opt->seed = ctx->input(2 * n + 2).scalar<tensorflow::int64>()();
    if (!(opt->drop_ratio >= 0.0f && opt->drop_ratio < 1.0f)) {
      return errors::InvalidArgument("drop_ratio must be in [0, 1), got ", opt->drop_ratio);
    }
    if (!(opt->sample_fraction > 0.0f && opt->sample_fraction <= 1.0f)) {
      return errors::InvalidArgument("sample_fraction must be in (0, 1], got ",
                                     opt->sample_fraction);
    }
    return tensorflow::OkStatus();
  }

  int num_tensors_ = 1;
  tensorflow::int64 exact_below_ = 0;
  tensorflow::int64 min_sample_ = 1;
};

#define TF_NMT_REGISTER_GRAD_DROP(T)                                                    \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("GradDrop").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),           \
      GradDropOp<T>);                                                                   \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("GradDropGlobal").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),     \
      GradDropOp<T>);

TF_NMT_REGISTER_GRAD_DROP(float);
TF_NMT_REGISTER_GRAD_DROP(Eigen::half);
TF_NMT_REGISTER_GRAD_DROP(tensorflow::bfloat16);
#undef TF_NMT_REGISTER_GRAD_DROP

}  // namespace tf_nmt
