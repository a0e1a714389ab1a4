// GPU OpKernels for PackNibbles / UnpackNibbles (CUDA kernels in nibble_kernels.cu.cc).
// UnpackNibbles' `size` is a host-memory input (it decides the output shape and is validated on
// the host); PackNibbles checks codes >= 16 through a device flag (op_util_gpu.h).
#if GOOGLE_CUDA
#include "op_util_gpu.h"
#include "quant_gpu.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernel;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
using tensorflow::uint8;
namespace errors = tensorflow::errors;

namespace {

class PackNibblesGpuOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& codes = ctx->input(0);
    const int64_t n = codes.NumElements();
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, TensorShape({(n + 1) / 2}), &out), done);
    Tensor flag;
    OP_REQUIRES_OK_ASYNC(ctx, NewDeviceFlag(ctx, &flag), done);
    OP_REQUIRES_OK_ASYNC(
        ctx,
        CudaStatus(LaunchPackNibbles(GpuStream(ctx), codes.flat<uint8>().data(), n,
                                     out->flat<uint8>().data(),
                                     static_cast<unsigned int*>(Bytes(&flag))),
                   "pack nibbles"),
        done);
    CheckFlagThenDone(ctx, &flag, "PackNibbles needs codes < 16", std::move(done));
  }
};

class UnpackNibblesGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& packed = ctx->input(0);
    const Tensor& size_t_ = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(size_t_.shape()),
                errors::InvalidArgument("size must be a scalar"));
    const int64_t m = packed.NumElements();
    const int64_t n = size_t_.scalar<tensorflow::int64>()();
    OP_REQUIRES(ctx, n >= 0 && (n + 1) / 2 == m,
                errors::InvalidArgument("size ", n, " does not match ", m, " packed bytes"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &out));
    OP_REQUIRES_OK(ctx, CudaStatus(LaunchUnpackNibbles(GpuStream(ctx), packed.flat<uint8>().data(),
                                                       n, out->flat<uint8>().data()),
                                   "unpack nibbles"));
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("PackNibbles").Device(tensorflow::DEVICE_GPU), PackNibblesGpuOp);
REGISTER_KERNEL_BUILDER(Name("UnpackNibbles").Device(tensorflow::DEVICE_GPU).HostMemory("size"),
                        UnpackNibblesGpuOp);

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
