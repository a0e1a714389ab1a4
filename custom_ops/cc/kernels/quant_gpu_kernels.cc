// GPU OpKernels for {Log,Fixed}QuantizeEncode / Decode (float32); scale and bits stay on host.
//
// Compiled into the library only when setup.py builds with CUDA (GOOGLE_CUDA=1); TF then picks
// these kernels automatically for tensors placed on a GPU.
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#include "quant_codec.h"
#include "quant_gpu.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

namespace {

tensorflow::Status ReadHostScalars(OpKernelContext* ctx, float* scale, int* bits) {
  const Tensor& s = ctx->input(1);
  const Tensor& b = ctx->input(2);
  if (!TensorShapeUtils::IsScalar(s.shape()) || !TensorShapeUtils::IsScalar(b.shape())) {
    return errors::InvalidArgument("scale and bits must be scalars");
  }
  *scale = s.scalar<float>()();
  *bits = b.scalar<tensorflow::int32>()();
  if (*bits < 1 || *bits > 8) return errors::InvalidArgument("bits must be in 1..8, got ", *bits);
  if (!(*scale >= 0.0f && *scale <= FLT_MAX)) {
    return errors::InvalidArgument("scale must be finite and >= 0, got ", *scale);
  }
  return tensorflow::OkStatus();
}

template <class Codec>
class EncodeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadHostScalars(ctx, &scale, &bits));
    const Tensor& x = ctx->input(0);
    Tensor* codes = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    LaunchEncode<Codec>(ctx->eigen_gpu_device().stream(), x.flat<float>().data(), x.NumElements(),
                        scale, bits, codes->flat<tensorflow::uint8>().data());
  }
};

template <class Codec>
class DecodeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadHostScalars(ctx, &scale, &bits));
    const Tensor& codes = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, codes.shape(), &y));
    LaunchDecode<Codec>(ctx->eigen_gpu_device().stream(), codes.flat<tensorflow::uint8>().data(),
                        codes.NumElements(), scale, bits, y->flat<float>().data());
  }
};

}  // namespace

#define TF_NMT_REGISTER_GPU(PREFIX, CODEC)                                                   \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeEncode")                                      \
                              .Device(tensorflow::DEVICE_GPU)                                \
                              .HostMemory("scale")                                           \
                              .HostMemory("bits")                                            \
                              .TypeConstraint<float>("T"),                                   \
                          EncodeGpuOp<CODEC>);                                               \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeDecode")                                      \
                              .Device(tensorflow::DEVICE_GPU)                                \
                              .HostMemory("scale")                                           \
                              .HostMemory("bits")                                            \
                              .TypeConstraint<float>("out_type"),                            \
                          DecodeGpuOp<CODEC>);

TF_NMT_REGISTER_GPU("Log", LogCodec)
TF_NMT_REGISTER_GPU("Fixed", FixedCodec)
#undef TF_NMT_REGISTER_GPU

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
