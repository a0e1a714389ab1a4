// CUDA kernel for OneBitQuantize (per-column sign means of kept GradDrop entries).
//
// Bit-exact with the CPU kernel, including its sequential double sums: the kept entries are
// grouped by column with a stable radix sort (cub) of (column, position) pairs, so each column's
// entries stay in increasing position order; then one thread per column sums its positives and
// negatives in that order (double, as the CPU), writes the means and applies the quantisation and
// the residual updates of its entries in order. Duplicate indices (same column) are therefore
// updated in the CPU's order too. Parallel over columns only: fine for the kept sets of 2-D
// weights; a 1-D tensor (one column) is summed by one thread. An index outside [0, size) sets a
// device flag and nothing is written (the op then raises InvalidArgument).
#if GOOGLE_CUDA
#include <cstdint>

#include <cub/cub.cuh>

#include "float16_gpu.h"
#include "grad_drop_gpu.h"

namespace tf_nmt {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;

inline int GridFor(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxGrid ? kMaxGrid : b));
}
inline size_t AlignUp(size_t b) { return (b + 255) / 256 * 256; }

inline int KeyBits(int64_t columns) {  // bits of the largest key, `columns` (marks bad indices)
  int bits = 1;
  while (bits < 64 && (static_cast<uint64_t>(columns) >> bits) != 0) ++bits;
  return bits;
}

struct Layout {
  size_t keys_in, keys_out, pos_in, pos_out, temp, temp_bytes, total;
};

Layout MakeLayout(int64_t kept, int64_t columns) {
  Layout l;
  const size_t arr = AlignUp(sizeof(uint64_t) * (kept > 0 ? kept : 1));
  l.keys_in = 0;
  l.keys_out = arr;
  l.pos_in = 2 * arr;
  l.pos_out = 3 * arr;
  l.temp = 4 * arr;
  l.temp_bytes = 0;
  if (kept > 0) {
    cub::DeviceRadixSort::SortPairs(nullptr, l.temp_bytes, static_cast<const uint64_t*>(nullptr),
                                    static_cast<uint64_t*>(nullptr),
                                    static_cast<const int64_t*>(nullptr),
                                    static_cast<int64_t*>(nullptr), kept, 0, KeyBits(columns));
  }
  l.total = l.temp + AlignUp(l.temp_bytes > 0 ? l.temp_bytes : 1);
  return l;
}

__device__ inline int64_t ThreadId() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void KeysKernel(const int64_t* indices, int64_t kept, int64_t columns, int64_t size,
                           uint64_t* keys, int64_t* pos, unsigned int* d_bad) {
  bool bad = false;
  for (int64_t j = ThreadId(); j < kept; j += GridStride()) {
    const int64_t idx = indices[j];
    const bool out = idx < 0 || idx >= size;
    bad |= out;
    keys[j] = out ? static_cast<uint64_t>(columns) : static_cast<uint64_t>(idx % columns);
    pos[j] = j;
  }
  if (bad) atomicOr(d_bad, 1u);
}

__device__ inline int64_t LowerBound(const uint64_t* keys, int64_t n, uint64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key) lo = mid + 1; else hi = mid;
  }
  return lo;
}

template <typename T>
__global__ void ColumnKernel(const int64_t* indices, const T* values, int64_t kept,
                             int64_t columns, const uint64_t* keys, const int64_t* pos, T* residual,
                             T* quantized, T* positive_means, T* negative_means,
                             const unsigned int* d_bad) {
  if (*d_bad != 0) return;  // uniform: set by KeysKernel, earlier on the stream
  for (int64_t c = ThreadId(); c < columns; c += GridStride()) {
    const int64_t lo = LowerBound(keys, kept, static_cast<uint64_t>(c));
    const int64_t hi = LowerBound(keys, kept, static_cast<uint64_t>(c) + 1);
    double pos_sum = 0.0, neg_sum = 0.0;
    int64_t pos_n = 0, neg_n = 0;
    for (int64_t p = lo; p < hi; ++p) {
      const float v = Elem<T>::Load(values[pos[p]]);
      if (v > 0.0f) {
        pos_sum += v;
        ++pos_n;
      } else if (v < 0.0f) {
        neg_sum += v;
        ++neg_n;
      }
    }
    const T pm = Elem<T>::Store(pos_n ? static_cast<float>(pos_sum / pos_n) : 0.0f);
    const T nm = Elem<T>::Store(neg_n ? static_cast<float>(neg_sum / neg_n) : 0.0f);
    positive_means[c] = pm;
    negative_means[c] = nm;
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = pos[p];
      const T v = values[j];
      const float f = Elem<T>::Load(v);
      const T q = f > 0.0f ? pm : (f < 0.0f ? nm : v);
      quantized[j] = q;
      const int64_t idx = indices[j];
      residual[idx] = AddAsCpu(residual[idx], SubAsCpu(v, q));
    }
  }
}

}  // namespace

size_t OneBitScratchBytes(int64_t kept, int64_t columns) { return MakeLayout(kept, columns).total; }

template <typename T>
cudaError_t LaunchOneBit(cudaStream_t stream, const int64_t* indices, const T* values,
                         int64_t kept, int64_t columns, int64_t size, T* residual, T* quantized,
                         T* positive_means, T* negative_means, void* scratch,
                         unsigned int* d_bad) {
  const Layout l = MakeLayout(kept, columns);
  char* base = static_cast<char*>(scratch);
  uint64_t* keys_in = reinterpret_cast<uint64_t*>(base + l.keys_in);
  uint64_t* keys_out = reinterpret_cast<uint64_t*>(base + l.keys_out);
  int64_t* pos_in = reinterpret_cast<int64_t*>(base + l.pos_in);
  int64_t* pos_out = reinterpret_cast<int64_t*>(base + l.pos_out);
  if (kept > 0) {
    KeysKernel<<<GridFor(kept), kThreads, 0, stream>>>(indices, kept, columns, size, keys_in, pos_in, d_bad);
    size_t temp_bytes = l.temp_bytes;
    const cudaError_t err = cub::DeviceRadixSort::SortPairs(
        base + l.temp, temp_bytes, keys_in, keys_out, pos_in, pos_out, kept, 0, KeyBits(columns),
        stream);
    if (err != cudaSuccess) return err;
  }
  ColumnKernel<T><<<GridFor(columns), kThreads, 0, stream>>>(
      indices, values, kept, columns, keys_out, pos_out, residual, quantized, positive_means,
      negative_means, d_bad);
  return cudaGetLastError();
}

#define TF_NMT_INSTANTIATE(T)                                                                \
  template cudaError_t LaunchOneBit<T>(cudaStream_t, const int64_t*, const T*, int64_t,      \
                                       int64_t, int64_t, T*, T*, T*, T*, void*, unsigned int*);
TF_NMT_INSTANTIATE(float)
TF_NMT_INSTANTIATE(Half16)
TF_NMT_INSTANTIATE(Bf16)
#undef TF_NMT_INSTANTIATE

}  // namespace tf_nmt
#endif  // GOOGLE_CUDA
