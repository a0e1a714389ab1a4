// CPU kernels for GradDrop and GradDropGlobal: error-feedback gradient dropping.
//
// sum = gradient + residual is computed once (in T); entries with |sum| >= threshold are
// emitted as (flat index, value) pairs and zeroed in the new residual, everything else stays in
// the residual unchanged. Hence scatter(values) + new_residual == sum bit-exactly.
// Layout of inputs/outputs (N tensors; N = 1 for GradDrop):
//   inputs  [gradients x N, residuals x N, drop_ratio, sample_fraction, seed]
//   outputs [indices x N, values x N, new_residuals x N, threshold]
#include <cmath>
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

    // Pass A: new_residual = gradient + residual; count kept entries per block and group.
    std::vector<T*> residual(n);
    std::vector<std::pair<int, int64_t>> blocks;
    for (int t = 0; t < n; ++t) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({n + t}, 2 * n + t,
                                                                ctx->input(n + t).shape(), &out));
      residual[t] = out->flat<T>().data();
      for (int64_t b = 0; b < NumBlocks(spans[t].size); ++b) blocks.emplace_back(t, b);
    }
    // Groups of kGroup entries (a block holds whole groups) remember whether they keep anything,
    // so pass B touches only those groups.
    constexpr int kGroup = 16;
    std::vector<std::vector<uint8_t>> hit(n);
    for (int t = 0; t < n; ++t) hit[t].resize((spans[t].size + kGroup - 1) / kGroup);
    std::vector<int64_t> counts(blocks.size(), 0);
    ForEachBlock(ctx, blocks.size(), [&](int64_t k) {
      const auto [t, b] = blocks[k];
      const GradSpan<T>& s = spans[t];
      T* res = residual[t];
      uint8_t* hits = hit[t].data();
      const int64_t lo = b * kBlockSize, hi = std::min(s.size, lo + kBlockSize);
      int64_t count = 0;
      int64_t i = lo;
      for (; i + kGroup <= hi; i += kGroup) {
        int c = 0;
        for (int j = 0; j < kGroup; ++j) {
          const T sum = s.gradient[i + j] + s.residual[i + j];
          res[i + j] = sum;
          c += std::fabs(static_cast<float>(sum)) >= threshold;
        }
        hits[i / kGroup] = c != 0;
        count += c;
      }
      int c = 0;
      for (; i < hi; ++i) {
        const T sum = s.gradient[i] + s.residual[i];
        res[i] = sum;
        c += std::fabs(static_cast<float>(sum)) >= threshold;
      }
      if (hi % kGroup != 0) hits[(hi - 1) / kGroup] = c != 0;
      counts[k] = count + c;
    });

    // Per-block output offsets (prefix sums within each tensor), then allocate outputs.
    std::vector<int64_t> starts(blocks.size(), 0), totals(n, 0);
    for (size_t k = 0; k < blocks.size(); ++k) {
      starts[k] = totals[blocks[k].first];
      totals[blocks[k].first] += counts[k];
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

    // Pass B: emit kept entries in index order and zero them in the residual.
    const T zero = static_cast<T>(0.0f);
    ForEachBlock(ctx, blocks.size(), [&](int64_t k) {
      const auto [t, b] = blocks[k];
      T* res = residual[t];
      const int64_t lo = b * kBlockSize, hi = std::min(spans[t].size, lo + kBlockSize);
      int64_t o = starts[k];
      auto emit = [&](int64_t i) {
        const T v = res[i];
        if (std::fabs(static_cast<float>(v)) >= threshold) {
          indices[t][o] = i;
          values[t][o] = v;
          res[i] = zero;
          ++o;
        }
      };
      const uint8_t* hits = hit[t].data();
      for (int64_t g = lo; g < hi; g += kGroup) {
        if (!hits[g / kGroup]) continue;
        const int64_t end = std::min(hi, g + kGroup);
        for (int64_t i = g; i < end; ++i) emit(i);
      }
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
