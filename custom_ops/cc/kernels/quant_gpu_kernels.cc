// GPU OpKernels for the log / fixed-point quantisers (all five ops, float / half / bfloat16).
// The CUDA kernels are in quant_kernels.cu.cc; this file only validates, allocates and launches.
//
// Memory placement: `bits` (and for Encode / Decode `scale`) are host-memory inputs, validated on
// the host with the CPU kernels' messages. The fitted scale (Fit, Quantize, QuantizeDequantize)
// stays in device memory and the fused ops consume it there: fit + encode runs without a host
// round trip. Feeding a device scale into Encode / Decode makes TF copy that scalar to the host.
// Decode checks codes >= 2^bits through a device flag (op_util_gpu.h).
// QuantizeDequantize's straight-through gradient is the identity (registered in Python,
// tf_nmt/ops/_gradients.py), so it needs no kernel.
#if GOOGLE_CUDA
#include <string>

#include "op_util_gpu.h"
#include "parallel_blocks.h"
#include "quant_codec.h"
#include "quant_gpu.h"
#include "quant_inputs.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;

namespace {

static_assert(kBlockSize == (int64_t{1} << 16),
              "quant_kernels.cu.cc reproduces the CPU fit's 65536-entry blocks");

FitMode ParseMode(const std::string& mode) {
  if (mode == "unscaled") return FitMode::kUnscaled;
  if (mode == "max") return FitMode::kMax;
  return FitMode::kOptimised;
}

// Fits the scale of x into the device float *d_scale.
template <class Codec, typename T>
Status Fit(OpKernelContext* ctx, const Tensor& x, int bits, FitMode mode, int iterations,
           float* d_scale) {
  Tensor scratch;
  TF_RETURN_IF_ERROR(AllocScratch(ctx, FitScratchBytes(x.NumElements()), &scratch));
  return CudaStatus(LaunchFitScale<Codec>(GpuStream(ctx), GpuPtr<T>(x), x.NumElements(), bits,
                                          mode, iterations, Bytes(&scratch), d_scale),
                    "scale fit");
}

class FitAttrs : public OpKernel {
 public:
  explicit FitAttrs(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string mode;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("mode", &mode));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("iterations", &iterations_));
    mode_ = ParseMode(mode);
  }

 protected:
  FitMode mode_ = FitMode::kOptimised;
  int iterations_ = 0;
};

template <class Codec, typename T>
class FitGpuOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &s));
    OP_REQUIRES_OK(ctx, (Fit<Codec, T>(ctx, ctx->input(0), bits, mode_, iterations_,
                                       s->flat<float>().data())));
  }
};

template <class Codec, typename T>
class EncodeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadScale(ctx->input(1), &scale));
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(2), &bits));
    const Tensor& x = ctx->input(0);
    Tensor* codes = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    OP_REQUIRES_OK(ctx, CudaStatus(LaunchEncode<Codec>(GpuStream(ctx), GpuPtr<T>(x),
                                                       x.NumElements(), ScaleArg{scale, nullptr},
                                                       bits, codes->flat<tensorflow::uint8>().data()),
                                   "encode"));
  }
};

template <class Codec, typename T>
class DecodeGpuOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    float scale = 0.0f;
    int bits = 0;
    OP_REQUIRES_OK_ASYNC(ctx, ReadScale(ctx->input(1), &scale), done);
    OP_REQUIRES_OK_ASYNC(ctx, ReadBits(ctx->input(2), &bits), done);
    const Tensor& codes = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, codes.shape(), &y), done);
    Tensor flag;
    OP_REQUIRES_OK_ASYNC(ctx, NewDeviceFlag(ctx, &flag), done);
    OP_REQUIRES_OK_ASYNC(
        ctx,
        CudaStatus(LaunchDecode<Codec>(GpuStream(ctx), codes.flat<tensorflow::uint8>().data(),
                                       codes.NumElements(), scale, bits, GpuPtr<T>(y),
                                       static_cast<unsigned int*>(Bytes(&flag))),
                   "decode"),
        done);
    CheckFlagThenDone(ctx, &flag, "codes must be < 2^bits = " + std::to_string(1 << bits),
                      std::move(done));
  }
};

template <class Codec, typename T>
class QuantizeGpuOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    const Tensor& x = ctx->input(0);
    Tensor* codes = nullptr;
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &s));
    float* d_scale = s->flat<float>().data();
    OP_REQUIRES_OK(ctx, (Fit<Codec, T>(ctx, x, bits, mode_, iterations_, d_scale)));
    OP_REQUIRES_OK(ctx, CudaStatus(LaunchEncode<Codec>(GpuStream(ctx), GpuPtr<T>(x),
                                                       x.NumElements(), ScaleArg{0.0f, d_scale},
                                                       bits, codes->flat<tensorflow::uint8>().data()),
                                   "encode"));
  }
};

template <class Codec, typename T>
class QuantDequantGpuOp : public FitAttrs {
 public:
  using FitAttrs::FitAttrs;
  void Compute(OpKernelContext* ctx) override {
    int bits = 0;
    OP_REQUIRES_OK(ctx, ReadBits(ctx->input(1), &bits));
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    Tensor* s = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {}, &s));
    float* d_scale = s->flat<float>().data();
    OP_REQUIRES_OK(ctx, (Fit<Codec, T>(ctx, x, bits, mode_, iterations_, d_scale)));
    OP_REQUIRES_OK(ctx, CudaStatus(LaunchQuantDequant<Codec>(GpuStream(ctx), GpuPtr<T>(x),
                                                             x.NumElements(),
                                                             ScaleArg{0.0f, d_scale}, bits,
                                                             GpuPtr<T>(y)),
                                   "quantize-dequantize"));
  }
};

}  // namespace

#define TF_NMT_REGISTER_GPU(PREFIX, CODEC, T)                                                  \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeFit")                                           \
                              .Device(tensorflow::DEVICE_GPU)                                  \
                              .HostMemory("bits")                                              \
                              .TypeConstraint<T>("T"),                                         \
                          FitGpuOp<CODEC, T>);                                                 \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeEncode")                                        \
                              .Device(tensorflow::DEVICE_GPU)                                  \
                              .HostMemory("scale")                                             \
                              .HostMemory("bits")                                              \
                              .TypeConstraint<T>("T"),                                         \
                          EncodeGpuOp<CODEC, T>);                                              \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeDecode")                                        \
                              .Device(tensorflow::DEVICE_GPU)                                  \
                              .HostMemory("scale")                                             \
                              .HostMemory("bits")                                              \
                              .TypeConstraint<T>("out_type"),                                  \
                          DecodeGpuOp<CODEC, T>);                                              \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "Quantize")                                              \
                              .Device(tensorflow::DEVICE_GPU)                                  \
                              .HostMemory("bits")                                              \
                              .TypeConstraint<T>("T"),                                         \
                          QuantizeGpuOp<CODEC, T>);                                            \
  REGISTER_KERNEL_BUILDER(Name(PREFIX "QuantizeDequantize")                                    \
                              .Device(tensorflow::DEVICE_GPU)                                  \
                              .HostMemory("bits")                                              \
                              .TypeConstraint<T>("T"),                                         \
                          QuantDequantGpuOp<CODEC, T>);

#define TF_NMT_REGISTER_GPU_TYPES(PREFIX, CODEC)   \
  TF_NMT_REGISTER_GPU(PREFIX, CODEC, float)        \
  TF_NMT_REGISTER_GPU(PREFIX, CODEC, Eigen::half)  \
  TF_NMT_REGISTER_GPU(PREFIX, CODEC, tensorflow::bfloat16)

TF_NMT_REGISTER_GPU_TYPES("Log", LogCodec)
TF_NMT_REGISTER_GPU_TYPES("Fixed", FixedCodec)
#undef TF_NMT_REGISTER_GPU_TYPES
#undef TF_NMT_REGISTER_GPU

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
