// Fixed-size blocks run on TF's intra-op thread pool.
//
// Work is cut into blocks whose boundaries do not depend on the thread count, so per-block
// partial results (counts, double sums) combine in a fixed order: outputs are deterministic.
#ifndef TF_NMT_PARALLEL_BLOCKS_H_
#define TF_NMT_PARALLEL_BLOCKS_H_

#include <cstdint>
#include <functional>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tf_nmt {

constexpr int64_t kBlockSize = 1 << 16;

inline int64_t NumBlocks(int64_t n) { return (n + kBlockSize - 1) / kBlockSize; }

// Calls fn(block) for every block in [0, num_blocks) using the kernel's CPU worker threads.
inline void ForEachBlock(tensorflow::OpKernelContext* ctx, int64_t num_blocks,
                         const std::function<void(int64_t)>& fn) {
  if (num_blocks <= 0) return;
  if (num_blocks == 1) {
    fn(0);
    return;
  }
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
  tensorflow::Shard(workers->num_threads, workers->workers, num_blocks,
                    /*cost_per_unit=*/kBlockSize * 8, [&fn](int64_t begin, int64_t end) {
                      for (int64_t b = begin; b < end; ++b) fn(b);
                    });
}

}  // namespace tf_nmt

#endif  // TF_NMT_PARALLEL_BLOCKS_H_
