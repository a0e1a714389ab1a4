// CPU kernel for OneBitQuantize: per-column sign means for kept GradDrop entries.
//
// Runs on the (small) kept set only; the residual is forwarded in place when possible.
#include <algorithm>
#include <vector>

#include "parallel_blocks.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

template <typename T>
class OneBitQuantizeOp : public OpKernel {
 public:
  explicit OneBitQuantizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const Tensor& values = ctx->input(1);
    const Tensor& residual = ctx->input(2);
    const Tensor& columns_t = ctx->input(3);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(indices.shape()) &&
                         TensorShapeUtils::IsVector(values.shape()) &&
                         indices.NumElements() == values.NumElements(),
                errors::InvalidArgument("indices and values must be vectors of equal length, got ",
                                        indices.shape().DebugString(), " and ",
                                        values.shape().DebugString()));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(columns_t.shape()),
                errors::InvalidArgument("num_columns must be a scalar"));
    const int64_t columns = columns_t.scalar<tensorflow::int64>()();
    const int64_t size = residual.NumElements();
    OP_REQUIRES(ctx, columns >= 1 && (size % columns == 0),
                errors::InvalidArgument("num_columns must be >= 1 and divide the residual size ",
                                        size, ", got ", columns));
    const auto idx = indices.flat<tensorflow::int64>();
    const auto val = values.flat<T>();
    const int64_t kept = idx.size();
    for (int64_t j = 0; j < kept; ++j) {
      OP_REQUIRES(ctx, idx(j) >= 0 && idx(j) < size,
                  errors::InvalidArgument("index ", idx(j), " out of range [0, ", size, ")"));
    }

    // Column sums and counts of kept positives and negatives (double, sequential: deterministic).
    std::vector<double> pos_sum(columns, 0.0), neg_sum(columns, 0.0);
    std::vector<int64_t> pos_n(columns, 0), neg_n(columns, 0);
    for (int64_t j = 0; j < kept; ++j) {
      const float v = static_cast<float>(val(j));
      const int64_t c = idx(j) % columns;
      if (v > 0.0f) {
        pos_sum[c] += v;
        ++pos_n[c];
      } else if (v < 0.0f) {
        neg_sum[c] += v;
        ++neg_n[c];
      }
    }
    Tensor* pos_t = nullptr;
    Tensor* neg_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({columns}), &pos_t));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({columns}), &neg_t));
    auto pos = pos_t->flat<T>();
    auto neg = neg_t->flat<T>();
    for (int64_t c = 0; c < columns; ++c) {
      pos(c) = static_cast<T>(pos_n[c] ? static_cast<float>(pos_sum[c] / pos_n[c]) : 0.0f);
      neg(c) = static_cast<T>(neg_n[c] ? static_cast<float>(neg_sum[c] / neg_n[c]) : 0.0f);
    }

    Tensor* res_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({2}, 1, residual.shape(), &res_t));
    T* res = res_t->flat<T>().data();
    const T* src = residual.flat<T>().data();
    if (res != src) {
      ForEachBlock(ctx, NumBlocks(size), [&](int64_t b) {
        const int64_t lo = b * kBlockSize, hi = std::min(size, lo + kBlockSize);
        std::copy(src + lo, src + hi, res + lo);
      });
    }
    Tensor* out_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, values.shape(), &out_t));
    auto out = out_t->flat<T>();
    for (int64_t j = 0; j < kept; ++j) {
      const T v = val(j);
      const float f = static_cast<float>(v);
      const int64_t c = idx(j) % columns;
      const T q = f > 0.0f ? pos(c) : (f < 0.0f ? neg(c) : v);
      out(j) = q;
      res[idx(j)] = res[idx(j)] + static_cast<T>(v - q);
    }
  }
};

#define TF_NMT_REGISTER_ONE_BIT(T)                                                      \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("OneBitQuantize").Device(tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),     \
      OneBitQuantizeOp<T>);

TF_NMT_REGISTER_ONE_BIT(float);
TF_NMT_REGISTER_ONE_BIT(Eigen::half);
TF_NMT_REGISTER_ONE_BIT(tensorflow::bfloat16);
#undef TF_NMT_REGISTER_ONE_BIT

}  // namespace tf_nmt
