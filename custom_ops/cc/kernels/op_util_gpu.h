// TensorFlow-side helpers for the GPU OpKernels (*_gpu_kernels.cc): the op's CUDA stream,
// device scratch and pinned host buffers, and asynchronous error checks.
//
// Misuse that only the device can see (a decode code >= 2^bits, a nibble >= 16, a OneBit index
// out of range) sets a 4-byte device flag. The op is an AsyncOpKernel: after its kernels it
// copies the flag to pinned host memory and asks TF's EventMgr to run a callback once the stream
// has reached that point; the callback sets InvalidArgument (the CPU kernel's error) before
// calling done(). No host thread blocks and nothing later in the graph sees the outputs of a
// failed op; the cost is one 4-byte device-to-host copy and one event per call.
#ifndef TF_NMT_OP_UTIL_GPU_H_
#define TF_NMT_OP_UTIL_GPU_H_

#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#include <cuda_runtime.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "float16_gpu.h"
#include "tensorflow/core/common_runtime/device/device_event_mgr.h"
#include "tensorflow/core/framework/bfloat16.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tf_nmt {

// Eigen element type -> the layout-compatible type the .cu.cc launchers take.
template <typename T>
struct GpuElem {
  using type = T;
};
template <>
struct GpuElem<Eigen::half> {
  using type = Half16;
};
template <>
struct GpuElem<Eigen::bfloat16> {
  using type = Bf16;
};
static_assert(sizeof(Eigen::half) == sizeof(Half16), "half layout");
static_assert(sizeof(Eigen::bfloat16) == sizeof(Bf16), "bfloat16 layout");

template <typename T>
typename GpuElem<T>::type* GpuPtr(tensorflow::Tensor* t) {
  return reinterpret_cast<typename GpuElem<T>::type*>(t->flat<T>().data());
}
template <typename T>
const typename GpuElem<T>::type* GpuPtr(const tensorflow::Tensor& t) {
  return reinterpret_cast<const typename GpuElem<T>::type*>(t.flat<T>().data());
}

inline cudaStream_t GpuStream(tensorflow::OpKernelContext* ctx) {
  return ctx->eigen_gpu_device().stream();
}

inline tensorflow::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return tensorflow::OkStatus();
  return tensorflow::errors::Internal(what, ": ", cudaGetErrorString(err));
}

// Device scratch of `bytes` (at least 1) bytes, 256-byte aligned by TF's allocator.
inline tensorflow::Status AllocScratch(tensorflow::OpKernelContext* ctx, size_t bytes,
                                       tensorflow::Tensor* t) {
  const int64_t n = static_cast<int64_t>(bytes > 0 ? bytes : 1);
  return ctx->allocate_temp(tensorflow::DT_UINT8, tensorflow::TensorShape({n}), t);
}

// Pinned (page-locked) host memory for asynchronous copies.
inline tensorflow::Status AllocPinned(tensorflow::OpKernelContext* ctx, size_t bytes,
                                      tensorflow::Tensor* t) {
  tensorflow::AllocatorAttributes attr;
  attr.set_on_host(true);
  attr.set_gpu_compatible(true);
  const int64_t n = static_cast<int64_t>(bytes > 0 ? bytes : 1);
  return ctx->allocate_temp(tensorflow::DT_UINT8, tensorflow::TensorShape({n}), t, attr);
}

inline void* Bytes(tensorflow::Tensor* t) { return t->flat<tensorflow::uint8>().data(); }

// Runs `fn` on TF's EventMgr thread once all work enqueued so far on the op's stream is done.
inline void ThenExecute(tensorflow::OpKernelContext* ctx, std::function<void()> fn) {
  auto* info = ctx->device()->tensorflow_accelerator_device_info();
  info->event_mgr->ThenExecute(ctx->op_device_context()->stream(), std::move(fn));
}

// The CUDA device that owns device pointer p (callbacks run on a thread whose current device
// may differ, and kernels must be launched with the stream's device current).
inline int DeviceOf(const void* p) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) return 0;
  return attr.device;
}

// Holds `t` until the stream has passed this point (for pinned buffers of async copies).
inline void KeepUntilStreamDone(tensorflow::OpKernelContext* ctx, tensorflow::Tensor t) {
  ThenExecute(ctx, [t]() { (void)t; });
}

// Zeroes a device flag (the caller launches kernels that may set it afterwards).
inline tensorflow::Status NewDeviceFlag(tensorflow::OpKernelContext* ctx, tensorflow::Tensor* t) {
  TF_RETURN_IF_ERROR(AllocScratch(ctx, sizeof(unsigned int), t));
  return CudaStatus(cudaMemsetAsync(Bytes(t), 0, sizeof(unsigned int), GpuStream(ctx)),
                    "cudaMemsetAsync");
}

// Copies the flag back and calls done() once the stream is there, with InvalidArgument(message)
// if the flag is set.
inline void CheckFlagThenDone(tensorflow::OpKernelContext* ctx, tensorflow::Tensor* flag,
                              std::string message, tensorflow::AsyncOpKernel::DoneCallback done) {
  tensorflow::Tensor host;
  OP_REQUIRES_OK_ASYNC(ctx, AllocPinned(ctx, sizeof(unsigned int), &host), done);
  OP_REQUIRES_OK_ASYNC(ctx,
                       CudaStatus(cudaMemcpyAsync(Bytes(&host), Bytes(flag), sizeof(unsigned int),
                                                  cudaMemcpyDeviceToHost, GpuStream(ctx)),
                                  "cudaMemcpyAsync"),
                       done);
  ThenExecute(ctx, [ctx, host, message = std::move(message), done = std::move(done)]() mutable {
    unsigned int bad = 0;
    std::memcpy(&bad, Bytes(&host), sizeof(bad));
    if (bad != 0) ctx->SetStatus(tensorflow::errors::InvalidArgument(message));
    done();
  });
}

}  // namespace tf_nmt

#endif  // GOOGLE_CUDA
#endif  // TF_NMT_OP_UTIL_GPU_H_
