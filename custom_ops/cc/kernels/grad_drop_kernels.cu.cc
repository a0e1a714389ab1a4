// CUDA kernels for GradDrop / GradDropGlobal (see grad_drop_gpu.h for the two phases).
//
// Threshold, on the device and bit-exact with the CPU kernel: the candidates are |g + r| (sum in
// T as the CPU computes it, float16_gpu.h), either all of them (exact case) or the same seeded
// stratified sample (StratifiedSampler, grad_drop_sample.h, shared with the CPU). The threshold
// is the QuantileRank-th smallest non-NaN candidate, found by an exact radix select on the
// float bits (non-negative floats order like their bits): four 8-bit histogram passes, each
// followed by a one-thread step that picks the bucket. An order statistic does not depend on the
// order of the reduction, so the threshold equals the CPU's nth_element result exactly.
//
// Drop: pass 1 writes new_residual = g + r for every entry (reading g and r once), a keep bit
// per entry (warp ballots) and one kept count per 4096-entry block; a device-wide exclusive scan
// (cub) gives each block its output offset. Pass 2 visits only the kept entries: it copies
// new_residual[i] (= the kept sum) to the outputs in increasing index order and zeroes it. Memory
// traffic is ~12.1 bytes per float entry plus the kept entries, vs 8 for a copy of the gradient.
// Mass is conserved exactly as on the CPU: scatter(values) + new_residual == g + r.
#if GOOGLE_CUDA
#include <cfloat>
#include <cstdint>

#include <cub/cub.cuh>

#include "float16_gpu.h"
#include "grad_drop_gpu.h"
#include "grad_drop_sample.h"

namespace tf_nmt {
namespace {

constexpr int kPass1Threads = 256;
constexpr int kWords = static_cast<int>(kGradDropGpuBlock / 32);  // keep-bit words per block
constexpr int kPass2Threads = kWords;                             // one thread per word
constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;
constexpr uint32_t kInfBits = 0x7f800000u;  // keys above this are NaN
static_assert(kGradDropGpuBlock % (kPass1Threads) == 0, "block size");

inline int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxGrid ? kMaxGrid : b));
}
inline int BlockGrid(int64_t blocks) {
  return static_cast<int>(blocks < 1 ? 1 : (blocks > (1 << 30) ? (1 << 30) : blocks));
}
inline size_t AlignUp(size_t b) { return (b + 255) / 256 * 256; }

struct RadixState {
  uint32_t prefix;
  uint32_t mask;
  int64_t k;
  int done;
  float threshold;
};

// Scratch layout (each part 256-byte aligned).
struct Layout {
  size_t state, hist, keys, masks, counts, scan, cub_temp, cub_bytes, total;
};

Layout MakeLayout(const GradDropPlan& plan) {
  Layout l;
  size_t at = 0;
  l.state = at;
  at += AlignUp(sizeof(RadixState));
  l.hist = at;
  at += AlignUp(sizeof(unsigned long long) * 4 * 256);
  l.keys = at;
  const int64_t num_keys = plan.keep_all ? 0 : (plan.exact ? plan.total : plan.samples);
  at += AlignUp(sizeof(uint32_t) * (num_keys > 0 ? num_keys : 1));
  l.masks = at;
  at += AlignUp(sizeof(uint32_t) * kWords * (plan.num_blocks > 0 ? plan.num_blocks : 1));
  l.counts = at;
  at += AlignUp(sizeof(int64_t) * (plan.num_blocks + 1));
  l.scan = at;
  at += AlignUp(sizeof(int64_t) * (plan.num_blocks + 1));
  l.cub_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, l.cub_bytes, static_cast<const int64_t*>(nullptr),
                                static_cast<int64_t*>(nullptr),
                                static_cast<int>(plan.num_blocks + 1));
  l.cub_temp = at;
  at += AlignUp(l.cub_bytes > 0 ? l.cub_bytes : 1);
  l.total = at;
  return l;
}

__device__ inline int64_t ThreadId() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Last span whose first block is <= b (spans without blocks are never returned for a valid b).
__device__ inline int SpanOfBlock(const GradDropSpan* spans, int n, int64_t b) {
  int lo = 0, hi = n;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (spans[mid].first_block <= b) lo = mid; else hi = mid;
  }
  return lo;
}

// Last span whose offset is <= at.
__device__ inline int SpanOfIndex(const GradDropSpan* spans, int n, int64_t at) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (spans[mid].offset <= at) lo = mid; else hi = mid;
  }
  return lo;
}

template <typename T>
__device__ inline T SumAt(const GradDropSpan& s, int64_t i) {
  return AddAsCpu(static_cast<const T*>(s.gradient)[i], static_cast<const T*>(s.residual)[i]);
}

template <typename T>
__device__ inline uint32_t KeyOf(T sum) {
  return __float_as_uint(fabsf(Elem<T>::Load(sum)));
}

// ---- threshold ------------------------------------------------------------------------------

template <typename T>
__global__ void SampleKeysKernel(const GradDropSpan* spans, int n, StratifiedSampler sampler,
                                 int64_t samples, uint32_t* keys) {
  for (int64_t j = ThreadId(); j < samples; j += GridStride()) {
    const int64_t at = sampler.Pick(j);
    const GradDropSpan& s = spans[SpanOfIndex(spans, n, at)];
    keys[j] = KeyOf(SumAt<T>(s, at - s.offset));
  }
}

template <typename T>
__global__ void AllKeysKernel(const GradDropSpan* spans, int n, int64_t num_blocks,
                              uint32_t* keys) {
  for (int64_t b = blockIdx.x; b < num_blocks; b += gridDim.x) {
    const GradDropSpan& s = spans[SpanOfBlock(spans, n, b)];
    const int64_t start = (b - s.first_block) * kGradDropGpuBlock;
    for (int64_t e = threadIdx.x; e < kGradDropGpuBlock; e += blockDim.x) {
      const int64_t i = start + e;
      if (i < s.size) keys[s.offset + i] = KeyOf(SumAt<T>(s, i));
    }
  }
}

// Histogram of digit `pass` (8 bits, most significant first) of the non-NaN keys that match the
// digits chosen so far.
__global__ void HistKernel(const uint32_t* keys, int64_t m, int pass, const RadixState* st,
                           unsigned long long* hist) {
  __shared__ unsigned int local[256];
  if (st->done) return;  // uniform
  for (int d = threadIdx.x; d < 256; d += blockDim.x) local[d] = 0;
  __syncthreads();
  const int shift = 24 - 8 * pass;
  const uint32_t prefix = st->prefix, mask = st->mask;
  for (int64_t i = ThreadId(); i < m; i += GridStride()) {
    const uint32_t key = keys[i];
    if (key <= kInfBits && (key & mask) == prefix) atomicAdd(&local[(key >> shift) & 255u], 1u);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) {
    if (local[d] != 0) atomicAdd(&hist[256 * pass + d], static_cast<unsigned long long>(local[d]));
  }
}

// Picks digit `pass` of the rank-k key (k fixed from the count of non-NaN keys in pass 0).
__global__ void SelectKernel(RadixState* st, const unsigned long long* hist, int pass,
                             float ratio) {
  if (st->done) return;
  const unsigned long long* h = hist + 256 * pass;
  if (pass == 0) {
    unsigned long long valid = 0;
    for (int d = 0; d < 256; ++d) valid += h[d];
    if (valid == 0) {  // nothing but NaN: keep none
      st->threshold = __uint_as_float(kInfBits);
      st->done = 1;
      return;
    }
    st->k = QuantileRank(ratio, static_cast<int64_t>(valid));
  }
  const int shift = 24 - 8 * pass;
  int64_t k = st->k;
  int d = 0;
  for (; d < 255; ++d) {
    if (k < static_cast<int64_t>(h[d])) break;
    k -= static_cast<int64_t>(h[d]);
  }
  st->k = k;
  st->prefix |= static_cast<uint32_t>(d) << shift;
  st->mask |= 255u << shift;
  if (pass == 3) {
    st->threshold = __uint_as_float(st->prefix);
    st->done = 1;
  }
}

__global__ void SetThresholdKernel(RadixState* st, float threshold) {
  st->threshold = threshold;
  st->done = 1;
}

// ---- drop -----------------------------------------------------------------------------------

template <typename T>
__global__ void Pass1Kernel(const GradDropSpan* spans, int n, int64_t num_blocks,
                            const RadixState* st, uint32_t* masks, int64_t* counts) {
  __shared__ int warp_kept[kPass1Threads / 32];
  const float threshold = st->threshold;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t b = blockIdx.x; b < num_blocks; b += gridDim.x) {
    const GradDropSpan s = spans[SpanOfBlock(spans, n, b)];
    const T* g = static_cast<const T*>(s.gradient);
    const T* r = static_cast<const T*>(s.residual);
    T* res = static_cast<T*>(s.new_residual);
    const int64_t start = (b - s.first_block) * kGradDropGpuBlock;
    int kept = 0;
#pragma unroll 4
    for (int k = 0; k < kGradDropGpuBlock / kPass1Threads; ++k) {
      const int64_t i = start + k * kPass1Threads + threadIdx.x;
      bool keep = false;
      if (i < s.size) {
        const T sum = AddAsCpu(g[i], r[i]);  // read g and r before writing (res may alias r)
        res[i] = sum;
        keep = fabsf(Elem<T>::Load(sum)) >= threshold;  // NaN never kept
      }
      const unsigned int ballot = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) {
        masks[b * kWords + k * (kPass1Threads / 32) + warp] = ballot;
        kept += __popc(ballot);
      }
    }
    if (lane == 0) warp_kept[warp] = kept;
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t total = 0;
      for (int w = 0; w < kPass1Threads / 32; ++w) total += warp_kept[w];
      counts[b] = total;
    }
    __syncthreads();
  }
}

__global__ void TotalsKernel(const GradDropSpan* spans, int n, const int64_t* scan,
                             const RadixState* st, char* result) {
  const int64_t t = ThreadId();
  if (t == 0) reinterpret_cast<GradDropResultHeader*>(result)->threshold = st->threshold;
  if (t < n) {
    const GradDropSpan& s = spans[t];
    const int64_t blocks = (s.size + kGradDropGpuBlock - 1) / kGradDropGpuBlock;
    reinterpret_cast<int64_t*>(result + sizeof(GradDropResultHeader))[t] =
        scan[s.first_block + blocks] - scan[s.first_block];
  }
}

template <typename T>
__global__ void Pass2Kernel(const GradDropSpan* spans, int n, int64_t num_blocks,
                            const uint32_t* masks, const int64_t* scan) {
  using BlockScan = cub::BlockScan<int, kPass2Threads>;
  __shared__ typename BlockScan::TempStorage temp;
  T zero;
  memset(&zero, 0, sizeof(zero));  // +0 in every supported type
  for (int64_t b = blockIdx.x; b < num_blocks; b += gridDim.x) {
    const GradDropSpan s = spans[SpanOfBlock(spans, n, b)];
    uint32_t word = masks[b * kWords + threadIdx.x];
    int offset = 0;
    BlockScan(temp).ExclusiveSum(__popc(word), offset);
    int64_t pos = scan[b] - scan[s.first_block] + offset;
    const int64_t base = (b - s.first_block) * kGradDropGpuBlock + 32 * threadIdx.x;
    T* res = static_cast<T*>(s.new_residual);
    T* values = static_cast<T*>(s.out_values);
    while (word != 0) {
      const int bit = __ffs(word) - 1;
      word &= word - 1;
      const int64_t i = base + bit;
      s.out_indices[pos] = i;
      values[pos] = res[i];
      res[i] = zero;
      ++pos;
    }
    __syncthreads();  // temp is reused by the next block
  }
}

}  // namespace

size_t GradDropScratchBytes(const GradDropPlan& plan) { return MakeLayout(plan).total; }

template <typename T>
cudaError_t LaunchGradDropPhase1(cudaStream_t stream, const GradDropPlan& plan,
                                 const GradDropSpan* d_spans, void* scratch, void* d_result) {
  const Layout l = MakeLayout(plan);
  char* base = static_cast<char*>(scratch);
  RadixState* st = reinterpret_cast<RadixState*>(base + l.state);
  unsigned long long* hist = reinterpret_cast<unsigned long long*>(base + l.hist);
  uint32_t* keys = reinterpret_cast<uint32_t*>(base + l.keys);
  uint32_t* masks = reinterpret_cast<uint32_t*>(base + l.masks);
  int64_t* counts = reinterpret_cast<int64_t*>(base + l.counts);
  int64_t* scan = reinterpret_cast<int64_t*>(base + l.scan);
  const int n = plan.num_spans;
  cudaError_t err = cudaMemsetAsync(base, 0, l.keys, stream);  // state + histograms
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(counts, 0, sizeof(int64_t) * (plan.num_blocks + 1), stream);
  if (err != cudaSuccess) return err;

  if (plan.keep_all) {
    SetThresholdKernel<<<1, 1, 0, stream>>>(st, 0.0f);
  } else {
    int64_t m = 0;
    if (plan.exact) {
      m = plan.total;
      AllKeysKernel<T><<<BlockGrid(plan.num_blocks), kThreads, 0, stream>>>(d_spans, n, plan.num_blocks, keys);
    } else {
      m = plan.samples;
      const StratifiedSampler sampler{plan.total, plan.stride, plan.base};
      SampleKeysKernel<T><<<GridFor(m), kThreads, 0, stream>>>(d_spans, n, sampler, m, keys);
    }
    for (int pass = 0; pass < 4; ++pass) {
      HistKernel<<<GridFor(m), kThreads, 0, stream>>>(keys, m, pass, st, hist);
      SelectKernel<<<1, 1, 0, stream>>>(st, hist, pass, plan.drop_ratio);
    }
  }
  if (plan.num_blocks > 0) {
    Pass1Kernel<T><<<BlockGrid(plan.num_blocks), kPass1Threads, 0, stream>>>(d_spans, n, plan.num_blocks, st, masks, counts);
  }
  size_t cub_bytes = l.cub_bytes;
  err = cub::DeviceScan::ExclusiveSum(base + l.cub_temp, cub_bytes, counts, scan,
                                      static_cast<int>(plan.num_blocks + 1), stream);
  if (err != cudaSuccess) return err;
  TotalsKernel<<<GridFor(n), kThreads, 0, stream>>>(d_spans, n, scan, st, static_cast<char*>(d_result));
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGradDropPhase2(cudaStream_t stream, const GradDropPlan& plan,
                                 const GradDropSpan* d_spans, void* scratch) {
  if (plan.num_blocks == 0) return cudaSuccess;
  const Layout l = MakeLayout(plan);
  char* base = static_cast<char*>(scratch);
  Pass2Kernel<T><<<BlockGrid(plan.num_blocks), kPass2Threads, 0, stream>>>(
      d_spans, plan.num_spans, plan.num_blocks, reinterpret_cast<const uint32_t*>(base + l.masks),
      reinterpret_cast<const int64_t*>(base + l.scan));
  return cudaGetLastError();
}

#define TF_NMT_INSTANTIATE(T)                                                                   \
  template cudaError_t LaunchGradDropPhase1<T>(cudaStream_t, const GradDropPlan&,               \
                                               const GradDropSpan*, void*, void*);              \
  template cudaError_t LaunchGradDropPhase2<T>(cudaStream_t, const GradDropPlan&,               \
                                               const GradDropSpan*, void*);
TF_NMT_INSTANTIATE(float)
TF_NMT_INSTANTIATE(Half16)
TF_NMT_INSTANTIATE(Bf16)
#undef TF_NMT_INSTANTIATE

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
