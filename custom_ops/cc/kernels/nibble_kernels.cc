// CPU kernels for PackNibbles / UnpackNibbles: 4-bit codes stored two per byte.
//
// packed[i] = codes[2i] | codes[2i+1] << 4 (low nibble first); an odd tail leaves the high
// nibble 0. The number of codes is passed back to UnpackNibbles explicitly.
#include <algorithm>
#include <vector>

#include "parallel_blocks.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
using tensorflow::uint8;
namespace errors = tensorflow::errors;

class PackNibblesOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& codes_t = ctx->input(0);
    const uint8* codes = codes_t.flat<uint8>().data();
    const int64_t n = codes_t.NumElements();
    const int64_t m = (n + 1) / 2;
    Tensor* out_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m}), &out_t));
    uint8* out = out_t->flat<uint8>().data();
    std::vector<char> bad(NumBlocks(m), 0);
    ForEachBlock(ctx, NumBlocks(m), [&](int64_t b) {
      const int64_t lo = b * kBlockSize, hi = std::min(m, lo + kBlockSize);
      uint8 high = 0;
      for (int64_t i = lo; i < hi; ++i) {
        const uint8 a = codes[2 * i];
        const uint8 c = 2 * i + 1 < n ? codes[2 * i + 1] : 0;
        high |= (a | c) >> 4;
        out[i] = static_cast<uint8>((a & 15) | (c << 4));
      }
      bad[b] = high != 0;
    });
    OP_REQUIRES(ctx, std::find(bad.begin(), bad.end(), 1) == bad.end(),
                errors::InvalidArgument("PackNibbles needs codes < 16"));
  }
};

class UnpackNibblesOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& packed_t = ctx->input(0);
    const Tensor& size_t_ = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(size_t_.shape()),
                errors::InvalidArgument("size must be a scalar"));
    const int64_t m = packed_t.NumElements();
    const int64_t n = size_t_.scalar<tensorflow::int64>()();
    OP_REQUIRES(ctx, n >= 0 && (n + 1) / 2 == m,
                errors::InvalidArgument("size ", n, " does not match ", m, " packed bytes"));
    const uint8* packed = packed_t.flat<uint8>().data();
    Tensor* out_t = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &out_t));
    uint8* out = out_t->flat<uint8>().data();
    ForEachBlock(ctx, NumBlocks(m), [&](int64_t b) {
      const int64_t lo = b * kBlockSize, hi = std::min(m, lo + kBlockSize);
      for (int64_t i = lo; i < hi; ++i) {
        out[2 * i] = packed[i] & 15;
        if (2 * i + 1 < n) out[2 * i + 1] = packed[i] >> 4;
      }
    });
  }
};

REGISTER_KERNEL_BUILDER(Name("PackNibbles").Device(tensorflow::DEVICE_CPU), PackNibblesOp);
REGISTER_KERNEL_BUILDER(Name("UnpackNibbles").Device(tensorflow::DEVICE_CPU), UnpackNibblesOp);

}  // namespace tf_nmt
