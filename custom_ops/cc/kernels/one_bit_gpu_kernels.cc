// GPU OpKernel for OneBitQuantize (CUDA kernels in one_bit_kernels.cu.cc). `num_columns` is a
// host-memory input; indices, values and the residual stay on the device. Indices outside
// [0, size) are reported through a device flag (op_util_gpu.h); the shapes are checked on the
// host with the CPU kernel's messages.
#if GOOGLE_CUDA
#include "grad_drop_gpu.h"
#include "op_util_gpu.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

namespace {

template <typename T>
class OneBitQuantizeGpuOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& indices = ctx->input(0);
    const Tensor& values = ctx->input(1);
    const Tensor& residual = ctx->input(2);
    const Tensor& columns_t = ctx->input(3);
    OP_REQUIRES_ASYNC(ctx,
                      TensorShapeUtils::IsVector(indices.shape()) &&
                          TensorShapeUtils::IsVector(values.shape()) &&
                          indices.NumElements() == values.NumElements(),
                      errors::InvalidArgument(
                          "indices and values must be vectors of equal length, got ",
                          indices.shape().DebugString(), " and ", values.shape().DebugString()),
                      done);
    OP_REQUIRES_ASYNC(ctx, TensorShapeUtils::IsScalar(columns_t.shape()),
                      errors::InvalidArgument("num_columns must be a scalar"), done);
    const int64_t columns = columns_t.scalar<tensorflow::int64>()();
    const int64_t size = residual.NumElements();
    OP_REQUIRES_ASYNC(ctx, columns >= 1 && (size % columns == 0),
                      errors::InvalidArgument(
                          "num_columns must be >= 1 and divide the residual size ", size,
                          ", got ", columns),
                      done);
    const int64_t kept = indices.NumElements();
    const cudaStream_t stream = GpuStream(ctx);

    Tensor* pos_t = nullptr;
    Tensor* neg_t = nullptr;
    Tensor* res_t = nullptr;
    Tensor* out_t = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(2, TensorShape({columns}), &pos_t), done);
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(3, TensorShape({columns}), &neg_t), done);
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({2}, 1, residual.shape(), &res_t),
                         done);
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, values.shape(), &out_t), done);
    const T* src = residual.flat<T>().data();
    T* res = res_t->flat<T>().data();
    if (res != src && size > 0) {
      OP_REQUIRES_OK_ASYNC(ctx,
                           CudaStatus(cudaMemcpyAsync(res, src, sizeof(T) * size,
                                                      cudaMemcpyDeviceToDevice, stream),
                                      "cudaMemcpyAsync"),
                           done);
    }
    Tensor flag, scratch;
    OP_REQUIRES_OK_ASYNC(ctx, NewDeviceFlag(ctx, &flag), done);
    OP_REQUIRES_OK_ASYNC(ctx, AllocScratch(ctx, OneBitScratchBytes(kept, columns), &scratch), done);
    OP_REQUIRES_OK_ASYNC(
        ctx,
        CudaStatus(LaunchOneBit(stream, indices.flat<tensorflow::int64>().data(),
                                GpuPtr<T>(values), kept, columns, size, GpuPtr<T>(res_t),
                                GpuPtr<T>(out_t), GpuPtr<T>(pos_t), GpuPtr<T>(neg_t),
                                Bytes(&scratch), static_cast<unsigned int*>(Bytes(&flag))),
                   "one-bit quantize"),
        done);
    CheckFlagThenDone(ctx, &flag, "index out of range [0, " + std::to_string(size) + ")",
                      std::move(done));
  }
};

}  // namespace

#define TF_NMT_REGISTER_ONE_BIT_GPU(T)                                                  \
  REGISTER_KERNEL_BUILDER(Name("OneBitQuantize")                                        \
                              .Device(tensorflow::DEVICE_GPU)                           \
                              .HostMemory("num_columns")                                \
                              .TypeConstraint<T>("T"),                                  \
                          OneBitQuantizeGpuOp<T>);
TF_NMT_REGISTER_ONE_BIT_GPU(float);
TF_NMT_REGISTER_ONE_BIT_GPU(Eigen::half);
TF_NMT_REGISTER_ONE_BIT_GPU(tensorflow::bfloat16);
#undef TF_NMT_REGISTER_ONE_BIT_GPU

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
