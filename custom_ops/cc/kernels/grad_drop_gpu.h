// Launchers for the CUDA GradDrop / GradDropGlobal and OneBitQuantize kernels
// (grad_drop_kernels.cu.cc, one_bit_kernels.cu.cc). Plain CUDA runtime interface, no TensorFlow
// types; T is float, Half16 or Bf16 (float16_gpu.h).
//
// GradDrop runs in two phases because the number of kept entries decides the output sizes:
//   phase 1 (LaunchGradDropPhase1): threshold on the device, then one pass that writes
//     new_residual = g + r everywhere, a keep bit per entry and a kept count per 4096-entry
//     block, then an exclusive scan of the counts and the per-tensor totals plus the threshold
//     into `d_result` (the caller copies those few bytes to pinned host memory);
//   phase 2 (LaunchGradDropPhase2), once the caller has allocated outputs of those sizes: every
//     block writes its kept (index, value) pairs at its scanned offset in increasing index order
//     and zeroes them in new_residual.
#ifndef TF_NMT_GRAD_DROP_GPU_H_
#define TF_NMT_GRAD_DROP_GPU_H_

#if GOOGLE_CUDA
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace tf_nmt {

constexpr int64_t kGradDropGpuBlock = 4096;  // entries per block (one CUDA block each)

// One (gradient, residual) pair; filled by the caller on the host and copied to the device.
struct GradDropSpan {
  const void* gradient;
  const void* residual;
  void* new_residual;     // may alias residual
  int64_t size;
  int64_t offset;         // first flat index in the concatenation of all spans
  int64_t first_block;    // first 4096-entry block of this span (blocks never straddle spans)
  int64_t* out_indices;   // phase 2 only
  void* out_values;       // phase 2 only
};

struct GradDropPlan {
  int num_spans;
  int64_t total;         // entries over all spans
  int64_t num_blocks;    // sum of ceil(size / 4096)
  float drop_ratio;
  bool keep_all;         // drop_ratio <= 0: threshold 0
  bool exact;            // exact selection over all entries, else over `samples` samples
  int64_t samples;
  double stride;         // total / samples (sampled case)
  uint64_t base;         // SplitMix64(seed)
};

// Device result of phase 1, copied to the host: threshold then one count per span.
struct GradDropResultHeader {
  float threshold;
  int pad;
};
inline size_t GradDropResultBytes(int num_spans) {
  return sizeof(GradDropResultHeader) + sizeof(int64_t) * num_spans;
}

size_t GradDropScratchBytes(const GradDropPlan& plan);

// d_spans: device copy of the span table (num_spans entries).
template <typename T>
cudaError_t LaunchGradDropPhase1(cudaStream_t stream, const GradDropPlan& plan,
                                 const GradDropSpan* d_spans, void* scratch, void* d_result);

// d_spans must now hold out_indices / out_values too.
template <typename T>
cudaError_t LaunchGradDropPhase2(cudaStream_t stream, const GradDropPlan& plan,
                                 const GradDropSpan* d_spans, void* scratch);

// OneBitQuantize on `kept` (index, value) pairs; residual (size entries) already holds the input
// residual. *d_bad (zeroed by the caller) becomes non-zero when an index is outside [0, size);
// then nothing is written. Scratch from OneBitScratchBytes.
size_t OneBitScratchBytes(int64_t kept, int64_t columns);
template <typename T>
cudaError_t LaunchOneBit(cudaStream_t stream, const int64_t* indices, const T* values,
                         int64_t kept, int64_t columns, int64_t size, T* residual, T* quantized,
                         T* positive_means, T* negative_means, void* scratch,
                         unsigned int* d_bad);

}  // namespace tf_nmt

#endif  // GOOGLE_CUDA
#endif  // TF_NMT_GRAD_DROP_GPU_H_
