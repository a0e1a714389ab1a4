// CUDA kernels for the log / fixed-point quantisers: scale fit, encode, decode and the fused
// encode+decode of QuantizeDequantize, for float, half and bfloat16 inputs.
//
// Encode / decode / quantise-dequantise are elementwise with the CPU kernels' scalar rules
// (quant_codec.h, compiled for host and device; --fmad=false so no float op is contracted):
// bit-exact with the CPU kernels. Memory-bound: each thread handles four elements per step with
// vector loads/stores when the pointers are aligned (16 B for float, 8 B for 16-bit types).
//
// Scale fit, bit-exact with the CPU kernel as well: max|v| is an order-free reduction (atomicMax
// on the bits of non-negative floats). The least-squares sums sum(c|v|) and sum(c^2) are
// reproduced in the CPU's exact order: per 65536-element block, eight double lanes (lane l sums
// the entries with (i - block start) % 8 == l, in increasing i), lanes added 0..7, then blocks
// added in block order by one thread. Products c|v| and c^2 of floats are exact in double, so the
// only roundings are the additions, and those happen in the same order as on the CPU. Cost:
// eight threads per 65536 entries, so a fit iteration reads at well below copy bandwidth; the
// iteration loop runs without host round trips (a "done" flag in device memory turns the
// remaining launches into no-ops once S stops changing).
// Decode reports codes >= 2^bits through a device flag that the op checks asynchronously.
#if GOOGLE_CUDA
#include <cfloat>
#include <cstdint>

#include "float16_gpu.h"
#include "quant_codec.h"
#include "quant_gpu.h"

namespace tf_nmt {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;
// Must equal kBlockSize in parallel_blocks.h (static_assert in quant_gpu_kernels.cc).
constexpr int64_t kFitBlock = int64_t{1} << 16;
constexpr int kFitLanes = 8;
constexpr int kFitUnroll = 16;

inline int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxGrid ? kMaxGrid : b));
}

__host__ __device__ inline int64_t FitBlocks(int64_t n) { return (n + kFitBlock - 1) / kFitBlock; }

struct FitState {
  float scale;
  int done;
  unsigned int max_bits;
  int pad;
};

inline size_t AlignUp(size_t b) { return (b + 15) / 16 * 16; }

__device__ inline int64_t ThreadId() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ inline float ReadScale(const ScaleArg& s) { return s.device ? *s.device : s.value; }

// Four consecutive elements (vector loads / stores; the caller checked the alignment).
__device__ inline void Load4(const float* x, int64_t q, float v[4]) {
  const float4 f = reinterpret_cast<const float4*>(x)[q];
  v[0] = f.x;
  v[1] = f.y;
  v[2] = f.z;
  v[3] = f.w;
}
template <typename T>
__device__ inline void Load4(const T* x, int64_t q, float v[4]) {
  const uint2 u = reinterpret_cast<const uint2*>(x)[q];
  v[0] = Elem<T>::Load(T{static_cast<uint16_t>(u.x & 0xffffu)});
  v[1] = Elem<T>::Load(T{static_cast<uint16_t>(u.x >> 16)});
  v[2] = Elem<T>::Load(T{static_cast<uint16_t>(u.y & 0xffffu)});
  v[3] = Elem<T>::Load(T{static_cast<uint16_t>(u.y >> 16)});
}
__device__ inline void Store4(float* y, int64_t q, const float v[4]) {
  reinterpret_cast<float4*>(y)[q] = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T>
__device__ inline void Store4(T* y, int64_t q, const float v[4]) {
  uint2 u;
  u.x = static_cast<uint32_t>(Elem<T>::Store(v[0]).x) |
        (static_cast<uint32_t>(Elem<T>::Store(v[1]).x) << 16);
  u.y = static_cast<uint32_t>(Elem<T>::Store(v[2]).x) |
        (static_cast<uint32_t>(Elem<T>::Store(v[3]).x) << 16);
  reinterpret_cast<uint2*>(y)[q] = u;
}

template <typename T>
bool Aligned4(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

// ---- scale fit ------------------------------------------------------------------------------

template <typename T>
__global__ void MaxAbsKernel(const T* x, int64_t n, FitState* st) {
  float m = 0.0f;
  for (int64_t i = ThreadId(); i < n; i += GridStride()) {
    const float a = FlushTiny(fabsf(Elem<T>::Load(x[i])));
    m = a <= FLT_MAX && a > m ? a : m;  // skips NaN and Inf
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_down_sync(0xffffffffu, m, off);
    m = o > m ? o : m;
  }
  if ((threadIdx.x & 31) == 0 && m > 0.0f) atomicMax(&st->max_bits, __float_as_uint(m));
}

__global__ void FitInitKernel(FitState* st, int mode) {
  const float m = __uint_as_float(st->max_bits);
  st->scale = kMaxScale < m ? kMaxScale : m;  // std::min(MaxAbs, kMaxScale)
  st->done = (mode == static_cast<int>(FitMode::kMax) || st->scale == 0.0f) ? 1 : 0;
}

// One thread per (65536-block, lane); see the file comment for the order.
template <class Codec, typename T>
__global__ void FitSumsKernel(const T* x, int64_t n, int bits, const FitState* st, double* num,
                              double* den) {
  __shared__ double s_num[kThreads];
  __shared__ double s_den[kThreads];
  if (st->done) return;  // uniform across the grid
  const int64_t tid = ThreadId();
  const int64_t b = tid / kFitLanes;
  const int lane = static_cast<int>(tid % kFitLanes);
  const bool active = b < FitBlocks(n);
  double an = 0.0, ad = 0.0;
  if (active) {
    const float inv = InvScale(st->scale);
    const int levels = 1 << (bits - 1);
    const int64_t hi = (b + 1) * kFitBlock < n ? (b + 1) * kFitBlock : n;
    int64_t i = b * kFitBlock + lane;
    auto add = [&](float raw_value) {
      const float raw = FlushTiny(fabsf(raw_value));
      const float a = raw <= FLT_MAX ? raw : -1.0f;  // -1 marks a non-finite value (left out)
      const float cj = Codec::Centre(Codec::MagIndex(Ratio(a, inv), levels), bits);
      const double c = a >= 0.0f ? cj : 0.0f;
      an += c * static_cast<double>(a);
      ad += c * c;
    };
    for (; i + kFitLanes * (kFitUnroll - 1) < hi; i += kFitLanes * kFitUnroll) {
      float v[kFitUnroll];
#pragma unroll
      for (int u = 0; u < kFitUnroll; ++u) v[u] = Elem<T>::Load(x[i + kFitLanes * u]);
#pragma unroll
      for (int u = 0; u < kFitUnroll; ++u) add(v[u]);
    }
    for (; i < hi; i += kFitLanes) add(Elem<T>::Load(x[i]));
  }
  s_num[threadIdx.x] = an;
  s_den[threadIdx.x] = ad;
  __syncthreads();
  if (active && lane == 0) {
    double dn = 0.0, dd = 0.0;
    for (int l = 0; l < kFitLanes; ++l) {
      dn += s_num[threadIdx.x + l];
      dd += s_den[threadIdx.x + l];
    }
    num[b] = dn;
    den[b] = dd;
  }
}

// Block sums in block order, then the CPU's update / stopping rule.
__global__ void FitStepKernel(FitState* st, const double* num, const double* den, int64_t blocks) {
  if (st->done) return;
  double sn = 0.0, sd = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    sn += num[b];
    sd += den[b];
  }
  if (!(sd > 0.0)) {
    st->done = 1;
    return;
  }
  const double q = sn / sd;
  const double capped = static_cast<double>(kMaxScale) < q ? static_cast<double>(kMaxScale) : q;
  const float next = static_cast<float>(capped);
  if (!(next >= FLT_MIN) || next == st->scale) {
    st->done = 1;
    return;
  }
  st->scale = next;
}

__global__ void FitFinishKernel(const FitState* st, float* d_scale) { *d_scale = st->scale; }

__global__ void SetFloatKernel(float* d, float v) { *d = v; }

// ---- encode / decode ------------------------------------------------------------------------

template <class Codec, typename T, bool kVec>
__global__ void EncodeKernel(const T* x, int64_t n, ScaleArg s, int bits, unsigned char* codes) {
  const float inv = InvScale(ReadScale(s));
  int64_t done = 0;
  if (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t q = ThreadId(); q < n4; q += GridStride()) {
      float v[4];
      Load4(x, q, v);
      uchar4 c;
      c.x = EncodeOne<Codec>(v[0], inv, bits);
      c.y = EncodeOne<Codec>(v[1], inv, bits);
      c.z = EncodeOne<Codec>(v[2], inv, bits);
      c.w = EncodeOne<Codec>(v[3], inv, bits);
      reinterpret_cast<uchar4*>(codes)[q] = c;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + ThreadId(); i < n; i += GridStride()) {
    codes[i] = EncodeOne<Codec>(Elem<T>::Load(x[i]), inv, bits);
  }
}

template <class Codec, typename T, bool kVec>
__global__ void DecodeKernel(const unsigned char* codes, int64_t n, float scale, int bits, T* y,
                             unsigned int* d_bad) {
  unsigned int high = 0;
  int64_t done = 0;
  if (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t q = ThreadId(); q < n4; q += GridStride()) {
      const uchar4 c = reinterpret_cast<const uchar4*>(codes)[q];
      high |= (c.x | c.y | c.z | c.w) >> bits;
      float v[4] = {DecodeOne<Codec>(c.x, scale, bits), DecodeOne<Codec>(c.y, scale, bits),
                    DecodeOne<Codec>(c.z, scale, bits), DecodeOne<Codec>(c.w, scale, bits)};
      Store4(y, q, v);
    }
    done = n4 * 4;
  }
  for (int64_t i = done + ThreadId(); i < n; i += GridStride()) {
    high |= codes[i] >> bits;
    y[i] = Elem<T>::Store(DecodeOne<Codec>(codes[i], scale, bits));
  }
  if (high != 0) atomicOr(d_bad, 1u);
}

template <class Codec, typename T, bool kVec>
__global__ void QuantDequantKernel(const T* x, int64_t n, ScaleArg s, int bits, T* y) {
  const float scale = ReadScale(s);
  const float inv = InvScale(scale);
  int64_t done = 0;
  if (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t q = ThreadId(); q < n4; q += GridStride()) {
      float v[4];
      Load4(x, q, v);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        v[u] = DecodeOne<Codec>(EncodeOne<Codec>(v[u], inv, bits), scale, bits);
      }
      Store4(y, q, v);
    }
    done = n4 * 4;
  }
  for (int64_t i = done + ThreadId(); i < n; i += GridStride()) {
    y[i] = Elem<T>::Store(
        DecodeOne<Codec>(EncodeOne<Codec>(Elem<T>::Load(x[i]), inv, bits), scale, bits));
  }
}

}  // namespace

size_t FitScratchBytes(int64_t n) {
  return AlignUp(sizeof(FitState)) + 2 * AlignUp(sizeof(double) * (FitBlocks(n) + 1));
}

cudaError_t LaunchSetFloat(cudaStream_t stream, float* d_value, float value) {
  SetFloatKernel<<<1, 1, 0, stream>>>(d_value, value);
  return cudaGetLastError();
}

template <class Codec, typename T>
cudaError_t LaunchFitScale(cudaStream_t stream, const T* x, int64_t n, int bits, FitMode mode,
                           int iterations, void* scratch, float* d_scale) {
  if (mode == FitMode::kUnscaled) return LaunchSetFloat(stream, d_scale, 1.0f);
  char* base = static_cast<char*>(scratch);
  FitState* st = reinterpret_cast<FitState*>(base);
  const int64_t blocks = FitBlocks(n);
  double* num = reinterpret_cast<double*>(base + AlignUp(sizeof(FitState)));
  double* den = reinterpret_cast<double*>(base + AlignUp(sizeof(FitState)) +
                                          AlignUp(sizeof(double) * (blocks + 1)));
  cudaError_t err = cudaMemsetAsync(st, 0, sizeof(FitState), stream);
  if (err != cudaSuccess) return err;
  if (n > 0) MaxAbsKernel<T><<<GridFor(n), kThreads, 0, stream>>>(x, n, st);
  FitInitKernel<<<1, 1, 0, stream>>>(st, static_cast<int>(mode));
  if (mode == FitMode::kOptimised && n > 0) {
    const int grid = GridFor(blocks * kFitLanes);  // blocks * 8 threads, far below the cap
    for (int it = 0; it < iterations; ++it) {
      FitSumsKernel<Codec, T><<<grid, kThreads, 0, stream>>>(x, n, bits, st, num, den);
      FitStepKernel<<<1, 1, 0, stream>>>(st, num, den, blocks);
    }
  }
  FitFinishKernel<<<1, 1, 0, stream>>>(st, d_scale);
  return cudaGetLastError();
}

template <class Codec, typename T>
cudaError_t LaunchEncode(cudaStream_t stream, const T* x, int64_t n, ScaleArg scale, int bits,
                         unsigned char* codes) {
  if (n <= 0) return cudaSuccess;
  if (Aligned4(x) && Aligned4(codes)) {
    EncodeKernel<Codec, T, true><<<GridFor(n / 4 + 1), kThreads, 0, stream>>>(x, n, scale, bits, codes);
  } else {
    EncodeKernel<Codec, T, false><<<GridFor(n), kThreads, 0, stream>>>(x, n, scale, bits, codes);
  }
  return cudaGetLastError();
}

template <class Codec, typename T>
cudaError_t LaunchDecode(cudaStream_t stream, const unsigned char* codes, int64_t n, float scale,
                         int bits, T* y, unsigned int* d_bad) {
  if (n <= 0) return cudaSuccess;
  if (Aligned4(codes) && Aligned4(y)) {
    DecodeKernel<Codec, T, true><<<GridFor(n / 4 + 1), kThreads, 0, stream>>>(codes, n, scale, bits, y, d_bad);
  } else {
    DecodeKernel<Codec, T, false><<<GridFor(n), kThreads, 0, stream>>>(codes, n, scale, bits, y, d_bad);
  }
  return cudaGetLastError();
}

template <class Codec, typename T>
cudaError_t LaunchQuantDequant(cudaStream_t stream, const T* x, int64_t n, ScaleArg scale,
                               int bits, T* y) {
  if (n <= 0) return cudaSuccess;
  if (Aligned4(x) && Aligned4(y)) {
    QuantDequantKernel<Codec, T, true><<<GridFor(n / 4 + 1), kThreads, 0, stream>>>(x, n, scale, bits, y);
  } else {
    QuantDequantKernel<Codec, T, false><<<GridFor(n), kThreads, 0, stream>>>(x, n, scale, bits, y);
  }
  return cudaGetLastError();
}

#define TF_NMT_INSTANTIATE(CODEC, T)                                                           \
  template cudaError_t LaunchFitScale<CODEC, T>(cudaStream_t, const T*, int64_t, int, FitMode, \
                                                int, void*, float*);                           \
  template cudaError_t LaunchEncode<CODEC, T>(cudaStream_t, const T*, int64_t, ScaleArg, int,  \
                                              unsigned char*);                                 \
  template cudaError_t LaunchDecode<CODEC, T>(cudaStream_t, const unsigned char*, int64_t,     \
                                              float, int, T*, unsigned int*);                  \
  template cudaError_t LaunchQuantDequant<CODEC, T>(cudaStream_t, const T*, int64_t, ScaleArg, \
                                                    int, T*);

TF_NMT_INSTANTIATE(LogCodec, float)
TF_NMT_INSTANTIATE(LogCodec, Half16)
TF_NMT_INSTANTIATE(LogCodec, Bf16)
TF_NMT_INSTANTIATE(FixedCodec, float)
TF_NMT_INSTANTIATE(FixedCodec, Half16)
TF_NMT_INSTANTIATE(FixedCodec, Bf16)
#undef TF_NMT_INSTANTIATE

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
