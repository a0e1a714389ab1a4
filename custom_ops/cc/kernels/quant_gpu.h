// Launchers for the CUDA quantisation and nibble kernels (quant_kernels.cu.cc,
// nibble_kernels.cu.cc). Plain CUDA runtime interface (no TensorFlow types), so the kernels can
// also be driven by a standalone harness; T is float, Half16 or Bf16 (float16_gpu.h). Every
// launcher only enqueues work on `stream` and returns the launch status.
#ifndef TF_NMT_QUANT_GPU_H_
#define TF_NMT_QUANT_GPU_H_

#if GOOGLE_CUDA
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace tf_nmt {

enum class FitMode { kUnscaled = 0, kMax = 1, kOptimised = 2 };

// The scale as a kernel argument: the value itself (host scalar input) or a device pointer to it
// (the result of a fit earlier on the same stream).
struct ScaleArg {
  float value;
  const float* device;
};

// Bytes of device scratch LaunchFitScale needs for n elements (8-byte aligned).
size_t FitScratchBytes(int64_t n);

// Fits the scale of x[0, n) into *d_scale (device), as the CPU FitScale: max|v| over finite
// values, then up to `iterations` least-squares steps S = sum(c|v|) / sum(c^2). No host sync:
// the iteration stops early through a flag in device memory.
template <class Codec, typename T>
cudaError_t LaunchFitScale(cudaStream_t stream, const T* x, int64_t n, int bits, FitMode mode,
                           int iterations, void* scratch, float* d_scale);

template <class Codec, typename T>
cudaError_t LaunchEncode(cudaStream_t stream, const T* x, int64_t n, ScaleArg scale, int bits,
                         unsigned char* codes);

// Decodes codes[0, n) into y; sets *d_bad (device, zeroed by the caller) to non-zero when some
// code is >= 2^bits (the CPU kernel's InvalidArgument).
template <class Codec, typename T>
cudaError_t LaunchDecode(cudaStream_t stream, const unsigned char* codes, int64_t n, float scale,
                         int bits, T* y, unsigned int* d_bad);

// y = decode(encode(x)) in one pass.
template <class Codec, typename T>
cudaError_t LaunchQuantDequant(cudaStream_t stream, const T* x, int64_t n, ScaleArg scale,
                               int bits, T* y);

// Sets *d_value = value on the device (e.g. the scale output of the fused ops).
cudaError_t LaunchSetFloat(cudaStream_t stream, float* d_value, float value);

// packed[(n + 1) / 2] from codes[n]; *d_bad (zeroed by the caller) != 0 when a code is >= 16.
cudaError_t LaunchPackNibbles(cudaStream_t stream, const unsigned char* codes, int64_t n,
                              unsigned char* packed, unsigned int* d_bad);
cudaError_t LaunchUnpackNibbles(cudaStream_t stream, const unsigned char* packed, int64_t n,
                                unsigned char* codes);

}  // namespace tf_nmt

#endif  // GOOGLE_CUDA
#endif  // TF_NMT_QUANT_GPU_H_
