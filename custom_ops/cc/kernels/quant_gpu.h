// Launchers for the GPU encode/decode kernels (defined in quant_kernels.cu.cc).
#ifndef TF_NMT_QUANT_GPU_H_
#define TF_NMT_QUANT_GPU_H_

#if GOOGLE_CUDA
#include <cstdint>

#include <cuda_runtime.h>

namespace tf_nmt {

template <class Codec>
void LaunchEncode(cudaStream_t stream, const float* x, int64_t n, float scale, int bits,
                  unsigned char* codes);

template <class Codec>
void LaunchDecode(cudaStream_t stream, const unsigned char* codes, int64_t n, float scale,
                  int bits, float* y);

}  // namespace tf_nmt

#endif  // GOOGLE_CUDA
#endif  // TF_NMT_QUANT_GPU_H_
