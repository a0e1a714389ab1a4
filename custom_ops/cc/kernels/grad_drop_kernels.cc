// CPU kernels for GradDrop and GradDropGlobal: error-feedback gradient dropping.
//
// sum = gradient + residual (in T); entries with |sum| >= threshold are emitted as (flat index,
// value) pairs and zeroed in the new residual, everything else stays in the residual unchanged.
// Hence scatter(values) + new_residual == sum bit-exactly. One pass over memory after sampling.
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

    std::vector<T*> residual(n);
    std::vector<std::pair<int, int64_t>> blocks;
    for (int t = 0; t < n; ++t) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({n + t}, 2 * n + t,
                                                                ctx->input(n + t).shape(), &out));
      residual[t] = out->flat<T>().data();
      for (int64_t b = 0; b < NumBlocks(spans[t].size); ++b) blocks.emplace_back(t, b);
    }
    // One pass: new_residual = sum, or 0 where kept; kept (index, value) pairs go to per-block
    // buffers. Groups of kGroup entries are processed branch-free (vectorises); only groups that
    // keep something are revisited to append their entries.
    constexpr int kGroup = 16;
    const T zero = static_cast<T>(0.0f);
    std::vector<std::vector<int64_t>> block_idx(blocks.size());
    std::vector<std::vector<T>> block_val(blocks.size());
    ForEachBlock(ctx, blocks.size(), [&](int64_t k) {
      const auto [t, b] = blocks[k];
      const GradSpan<T>& s = spans[t];
      T* res = residual[t];
      const int64_t lo = b * kBlockSize, hi = std::min(s.size, lo + kBlockSize);
      std::vector<int64_t>& out_idx = block_idx[k];
      std::vector<T>& out_val = block_val[k];
      int64_t i = lo;
      for (; i + kGroup <= hi; i += kGroup) {
        T sums[kGroup];
        int c = 0;
        for (int j = 0; j < kGroup; ++j) {
          sums[j] = s.gradient[i + j] + s.residual[i + j];
          c += std::fabs(static_cast<float>(sums[j])) >= threshold;
        }
        for (int j = 0; j < kGroup; ++j) {
          res[i + j] = std::fabs(static_cast<float>(sums[j])) >= threshold ? zero : sums[j];
        }
        if (c == 0) continue;
        for (int j = 0; j < kGroup; ++j) {
          if (std::fabs(static_cast<float>(sums[j])) >= threshold) {
            out_idx.push_back(i + j);
            out_val.push_back(sums[j]);
          }
        }
      }
      for (; i < hi; ++i) {
        const T sum = s.gradient[i] + s.residual[i];
        const bool keep = std::fabs(static_cast<float>(sum)) >= threshold;
        if (keep) {
          out_idx.push_back(i);
          out_val.push_back(sum);
        }
        res[i] = keep ? zero : sum;
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
