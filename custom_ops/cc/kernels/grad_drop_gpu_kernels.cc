// GPU OpKernels for GradDrop and GradDropGlobal (CUDA kernels in grad_drop_kernels.cu.cc).
//
// drop_ratio, sample_fraction and seed are host-memory inputs (validated on the host with the CPU
// kernel's messages); the threshold output is in host memory too. Gradients, residuals and the
// (indices, values) outputs stay on the device.
//
// Data-dependent output sizes: the number of kept entries per tensor is only known on the
// device, and TF needs output shapes on the host. The op is an AsyncOpKernel, like TF's own GPU
// `Where`: phase 1 (threshold, residual pass, counts, scan) is enqueued, the per-tensor counts and
// the threshold (8 + 8 N bytes) are copied to pinned host memory, and TF's EventMgr runs a
// callback once the stream gets there; the callback allocates the outputs and enqueues phase 2.
// No host thread blocks, and GradDropGlobal has one such copy per call for all N tensors; the
// stream does wait for the copy (one small device-to-host transfer per call, ~10 us).
#if GOOGLE_CUDA
#include <cmath>
#include <cstring>
#include <vector>

#include "grad_drop_gpu.h"
#include "grad_drop_plan.h"
#include "op_util_gpu.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_nmt {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

namespace {

template <typename T>
class GradDropGpuOp : public AsyncOpKernel {
 public:
  explicit GradDropGpuOp(OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    if (ctx->HasAttr("N")) OP_REQUIRES_OK(ctx, ctx->GetAttr("N", &num_tensors_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("exact_below", &exact_below_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("min_sample", &min_sample_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = num_tensors_;
    float drop_ratio = 0.0f, sample_fraction = 0.0f;
    tensorflow::int64 seed = 0;
    OP_REQUIRES_OK_ASYNC(ctx, ReadScalars(ctx, n, &drop_ratio, &sample_fraction, &seed), done);

    GradDropPlan plan = StartGradDropPlan(n, drop_ratio);
    Tensor h_spans_t;
    OP_REQUIRES_OK_ASYNC(ctx, AllocPinned(ctx, sizeof(GradDropSpan) * n, &h_spans_t), done);
    GradDropSpan* h_spans = static_cast<GradDropSpan*>(Bytes(&h_spans_t));
    for (int t = 0; t < n; ++t) {
      const Tensor& g = ctx->input(t);
      const Tensor& r = ctx->input(n + t);
      OP_REQUIRES_ASYNC(ctx, g.shape() == r.shape(),
                        errors::InvalidArgument("gradient and residual shapes differ (tensor ", t,
                                                "): ", g.shape().DebugString(), " vs ",
                                                r.shape().DebugString()),
                        done);
    }
    for (int t = 0; t < n; ++t) {
      const Tensor& g = ctx->input(t);
      Tensor* res = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output(
                                    {n + t}, 2 * n + t, ctx->input(n + t).shape(), &res),
                           done);
      GradDropSpan& s = h_spans[t];
      AddGradDropSpan(&plan, &s, g.NumElements());
      s.gradient = g.flat<T>().data();
      s.residual = ctx->input(n + t).flat<T>().data();
      s.new_residual = res->flat<T>().data();
    }
    if (plan.total == 0) {  // nothing to drop: empty outputs (CPU: threshold 0 if R <= 0 else inf)
      for (int t = 0; t < n; ++t) {
        Tensor* unused = nullptr;
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(t, TensorShape({0}), &unused), done);
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(n + t, TensorShape({0}), &unused), done);
      }
      Tensor* thr = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(3 * n, TensorShape({}), &thr), done);
      thr->scalar<float>()() = EmptyGradDropThreshold(plan);
      done();
      return;
    }
    FinishGradDropPlan(&plan, sample_fraction, seed, exact_below_, min_sample_);

    const cudaStream_t stream = GpuStream(ctx);
    Tensor d_spans_t, scratch_t, d_result_t, h_result_t;
    OP_REQUIRES_OK_ASYNC(ctx, AllocScratch(ctx, sizeof(GradDropSpan) * n, &d_spans_t), done);
    OP_REQUIRES_OK_ASYNC(ctx, AllocScratch(ctx, GradDropScratchBytes(plan), &scratch_t), done);
    OP_REQUIRES_OK_ASYNC(ctx, AllocScratch(ctx, GradDropResultBytes(n), &d_result_t), done);
    OP_REQUIRES_OK_ASYNC(ctx, AllocPinned(ctx, GradDropResultBytes(n), &h_result_t), done);
    auto* d_spans = static_cast<GradDropSpan*>(Bytes(&d_spans_t));
    OP_REQUIRES_OK_ASYNC(ctx,
                         CudaStatus(cudaMemcpyAsync(d_spans, h_spans, sizeof(GradDropSpan) * n,
                                                    cudaMemcpyHostToDevice, stream),
                                    "cudaMemcpyAsync"),
                         done);
    OP_REQUIRES_OK_ASYNC(ctx,
                         CudaStatus(LaunchGradDropPhase1<Elem>(stream, plan, d_spans,
                                                               Bytes(&scratch_t), Bytes(&d_result_t)),
                                    "GradDrop phase 1"),
                         done);
    OP_REQUIRES_OK_ASYNC(ctx,
                         CudaStatus(cudaMemcpyAsync(Bytes(&h_result_t), Bytes(&d_result_t),
                                                    GradDropResultBytes(n),
                                                    cudaMemcpyDeviceToHost, stream),
                                    "cudaMemcpyAsync"),
                         done);
    const int device = DeviceOf(Bytes(&scratch_t));
    ThenExecute(ctx, [=]() mutable {
      // Phase 2 on the EventMgr thread: make the op's device current for the launches.
      OP_REQUIRES_ASYNC(ctx, cudaSetDevice(device) == cudaSuccess,
                        errors::Internal("cudaSetDevice failed"), done);
      const char* result = static_cast<const char*>(Bytes(&h_result_t));
      GradDropResultHeader header;
      std::memcpy(&header, result, sizeof(header));
      GradDropSpan* spans = static_cast<GradDropSpan*>(Bytes(&h_spans_t));
      for (int t = 0; t < n; ++t) {
        int64_t count = 0;
        std::memcpy(&count, result + sizeof(header) + sizeof(int64_t) * t, sizeof(count));
        Tensor* idx = nullptr;
        Tensor* val = nullptr;
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(t, TensorShape({count}), &idx), done);
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(n + t, TensorShape({count}), &val), done);
        spans[t].out_indices = idx->flat<tensorflow::int64>().data();
        spans[t].out_values = val->flat<T>().data();
      }
      Tensor* thr = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(3 * n, TensorShape({}), &thr), done);
      thr->scalar<float>()() = header.threshold;
      const cudaStream_t s = GpuStream(ctx);
      OP_REQUIRES_OK_ASYNC(ctx,
                           CudaStatus(cudaMemcpyAsync(Bytes(&d_spans_t), spans,
                                                      sizeof(GradDropSpan) * n,
                                                      cudaMemcpyHostToDevice, s),
                                      "cudaMemcpyAsync"),
                           done);
      OP_REQUIRES_OK_ASYNC(
          ctx,
          CudaStatus(LaunchGradDropPhase2<Elem>(s, plan,
                                                static_cast<const GradDropSpan*>(Bytes(&d_spans_t)),
                                                Bytes(&scratch_t)),
                     "GradDrop phase 2"),
          done);
      KeepUntilStreamDone(ctx, h_spans_t);  // pinned source of the copy above
      done();
    });
  }

 private:
  using Elem = typename GpuElem<T>::type;

  static Status ReadScalars(OpKernelContext* ctx, int n, float* drop_ratio,
                            float* sample_fraction, tensorflow::int64* seed) {
    const char* names[3] = {"drop_ratio", "sample_fraction", "seed"};
    for (int i = 0; i < 3; ++i) {
      if (!TensorShapeUtils::IsScalar(ctx->input(2 * n + i).shape())) {
        return errors::InvalidArgument(names[i], " must be a scalar, got shape ",
                                       ctx->input(2 * n + i).shape().DebugString());
      }
    }
    *drop_ratio = ctx->input(2 * n).scalar<float>()();
    *sample_fraction = ctx->input(2 * n + 1).scalar<float>()();
    *seed = ctx->input(2 * n + 2).scalar<tensorflow::int64>()();
    if (!(*drop_ratio >= 0.0f && *drop_ratio < 1.0f)) {
      return errors::InvalidArgument("drop_ratio must be in [0, 1), got ", *drop_ratio);
    }
    if (!(*sample_fraction > 0.0f && *sample_fraction <= 1.0f)) {
      return errors::InvalidArgument("sample_fraction must be in (0, 1], got ", *sample_fraction);
    }
    return tensorflow::OkStatus();
  }

  int num_tensors_ = 1;
  tensorflow::int64 exact_below_ = 0;
  tensorflow::int64 min_sample_ = 1;
};

}  // namespace

#define TF_NMT_REGISTER_GRAD_DROP_GPU(T)                                                \
  REGISTER_KERNEL_BUILDER(Name("GradDrop")                                              \
                              .Device(tensorflow::DEVICE_GPU)                           \
                              .HostMemory("drop_ratio")                                 \
                              .HostMemory("sample_fraction")                            \
                              .HostMemory("seed")                                       \
                              .HostMemory("threshold")                                  \
                              .TypeConstraint<T>("T"),                                  \
                          GradDropGpuOp<T>);                                            \
  REGISTER_KERNEL_BUILDER(Name("GradDropGlobal")                                        \
                              .Device(tensorflow::DEVICE_GPU)                           \
                              .HostMemory("drop_ratio")                                 \
                              .HostMemory("sample_fraction")                            \
                              .HostMemory("seed")                                       \
                              .HostMemory("threshold")                                  \
                              .TypeConstraint<T>("T"),                                  \
                          GradDropGpuOp<T>);
TF_NMT_REGISTER_GRAD_DROP_GPU(float);
TF_NMT_REGISTER_GRAD_DROP_GPU(Eigen::half);
TF_NMT_REGISTER_GRAD_DROP_GPU(tensorflow::bfloat16);
#undef TF_NMT_REGISTER_GRAD_DROP_GPU

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
