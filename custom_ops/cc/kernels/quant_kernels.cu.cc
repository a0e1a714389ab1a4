// CUDA kernels for log / fixed-point encode and decode (float32), elementwise.
//
// Same scalar rules as the CPU kernels (quant_codec.h). Decode masks codes to `bits` bits; the
// range check of the CPU kernel is not repeated on the device.
#if GOOGLE_CUDA
#include "quant_codec.h"
#include "quant_gpu.h"

namespace tf_nmt {
namespace {

constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class Codec>
__global__ void EncodeKernel(const float* x, int64_t n, float inv_scale, int bits,
                             unsigned char* codes) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    codes[i] = EncodeOne<Codec>(x[i], inv_scale, bits);
  }
}

template <class Codec>
__global__ void DecodeKernel(const unsigned char* codes, int64_t n, float scale, int bits,
                             float* y) {
  const unsigned char mask = static_cast<unsigned char>((1 << bits) - 1);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    y[i] = DecodeOne<Codec>(codes[i] & mask, scale, bits);
  }
}

}  // namespace

template <class Codec>
void LaunchEncode(cudaStream_t stream, const float* x, int64_t n, float scale, int bits,
                  unsigned char* codes) {
  if (n > 0) EncodeKernel<Codec><<<Blocks(n), kThreads, 0, stream>>>(x, n, InvScale(scale), bits, codes);
}

template <class Codec>
void LaunchDecode(cudaStream_t stream, const unsigned char* codes, int64_t n, float scale,
                  int bits, float* y) {
  if (n > 0) DecodeKernel<Codec><<<Blocks(n), kThreads, 0, stream>>>(codes, n, scale, bits, y);
}

template void LaunchEncode<LogCodec>(cudaStream_t, const float*, int64_t, float, int, unsigned char*);
template void LaunchEncode<FixedCodec>(cudaStream_t, const float*, int64_t, float, int, unsigned char*);
template void LaunchDecode<LogCodec>(cudaStream_t, const unsigned char*, int64_t, float, int, float*);
template void LaunchDecode<FixedCodec>(cudaStream_t, const unsigned char*, int64_t, float, int, float*);

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
