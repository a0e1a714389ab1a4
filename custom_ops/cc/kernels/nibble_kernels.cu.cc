// CUDA kernels for PackNibbles / UnpackNibbles: packed[i] = codes[2i] | codes[2i+1] << 4 (low
// nibble first, an odd tail leaves the high nibble 0), as the CPU kernels. Pure byte shuffling:
// bit-exact. Pack reads four codes (one 32-bit word) per thread when aligned and writes two
// bytes; codes >= 16 set a device flag that the op checks asynchronously (the CPU's
// InvalidArgument).
#if GOOGLE_CUDA
#include <cstdint>

#include "quant_gpu.h"

namespace tf_nmt {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;

inline int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxGrid ? kMaxGrid : b));
}

__device__ inline int64_t ThreadId() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <bool kVec>
__global__ void PackKernel(const unsigned char* codes, int64_t n, unsigned char* packed,
                           unsigned int* d_bad) {
  const int64_t m = (n + 1) / 2;
  unsigned int high = 0;
  int64_t first = 0;
  if (kVec) {  // whole 4-code words: two packed bytes each
    const int64_t words = n / 4;
    for (int64_t w = ThreadId(); w < words; w += GridStride()) {
      const uint32_t u = reinterpret_cast<const uint32_t*>(codes)[w];
      high |= (u & 0xf0f0f0f0u);
      const uint32_t lo = (u & 0x0fu) | ((u >> 4) & 0xf0u);
      const uint32_t hi = ((u >> 16) & 0x0fu) | ((u >> 20) & 0xf0u);
      reinterpret_cast<uchar2*>(packed)[w] = make_uchar2(static_cast<unsigned char>(lo),
                                                         static_cast<unsigned char>(hi));
    }
    first = words * 2;
  }
  for (int64_t i = first + ThreadId(); i < m; i += GridStride()) {
    const unsigned char a = codes[2 * i];
    const unsigned char c = 2 * i + 1 < n ? codes[2 * i + 1] : 0;
    high |= static_cast<unsigned int>(a | c) >> 4;
    packed[i] = static_cast<unsigned char>((a & 15) | (c << 4));
  }
  if (high != 0) atomicOr(d_bad, 1u);
}

__global__ void UnpackKernel(const unsigned char* packed, int64_t n, unsigned char* codes) {
  const int64_t m = (n + 1) / 2;
  for (int64_t i = ThreadId(); i < m; i += GridStride()) {
    const unsigned char p = packed[i];
    if (2 * i + 1 < n) {
      codes[2 * i] = p & 15;
      codes[2 * i + 1] = p >> 4;
    } else {
      codes[2 * i] = p & 15;
    }
  }
}

}  // namespace

cudaError_t LaunchPackNibbles(cudaStream_t stream, const unsigned char* codes, int64_t n,
                              unsigned char* packed, unsigned int* d_bad) {
  if (n <= 0) return cudaSuccess;
  if (reinterpret_cast<uintptr_t>(codes) % 4 == 0 && reinterpret_cast<uintptr_t>(packed) % 2 == 0) {
    PackKernel<true><<<GridFor(n / 4 + 1), kThreads, 0, stream>>>(codes, n, packed, d_bad);
  } else {
    PackKernel<false><<<GridFor((n + 1) / 2), kThreads, 0, stream>>>(codes, n, packed, d_bad);
  }
  return cudaGetLastError();
}

cudaError_t LaunchUnpackNibbles(cudaStream_t stream, const unsigned char* packed, int64_t n,
                                unsigned char* codes) {
  if (n <= 0) return cudaSuccess;
  UnpackKernel<<<GridFor((n + 1) / 2), kThreads, 0, stream>>>(packed, n, codes);
  return cudaGetLastError();
}

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
