// Seeded stratified sampling and the quantile rank for GradDrop's threshold, shared by the CPU
// kernel (grad_drop_threshold.h) and the CUDA kernels (grad_drop_kernels.cu.cc), so that both
// draw the same samples and pick the same order statistic.
#ifndef TF_NMT_GRAD_DROP_SAMPLE_H_
#define TF_NMT_GRAD_DROP_SAMPLE_H_

#include <stdint.h>

#include <cmath>

#if defined(__CUDACC__)
#define TF_NMT_HD __host__ __device__
#else
#define TF_NMT_HD
#endif

namespace tf_nmt {

// splitmix64: a small counter-based generator, so sample j depends only on (seed, j).
TF_NMT_HD inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// High 64 bits of a * b.
TF_NMT_HD inline uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// One seeded random index in each of `samples` equal strata of [0, total): stratum j spans
// [edge(j), edge(j + 1)) with edge(j) = min(total, (int64) (j * stride)), stride = total /
// samples (>= 1), base = SplitMix64(seed).
struct StratifiedSampler {
  int64_t total;
  double stride;
  uint64_t base;

  TF_NMT_HD inline int64_t Edge(int64_t j) const {
    const int64_t e = static_cast<int64_t>(static_cast<double>(j) * stride);
    return total < e ? total : e;
  }
  TF_NMT_HD inline int64_t Pick(int64_t j) const {
    const int64_t lo = Edge(j), e1 = Edge(j + 1);
    const int64_t hi = lo + 1 > e1 ? lo + 1 : e1;
    const uint64_t h = SplitMix64(base + static_cast<uint64_t>(j));
    const int64_t at = lo + static_cast<int64_t>(MulHi64(h, static_cast<uint64_t>(hi - lo)));
    return total - 1 < at ? total - 1 : at;
  }
};

// Index (0-based, in increasing order) of the order statistic that is the threshold among n > 0
// non-NaN magnitudes: min(max(floor(ratio * n), 0), n - 1).
TF_NMT_HD inline int64_t QuantileRank(float ratio, int64_t n) {
  int64_t drop = static_cast<int64_t>(floor(static_cast<double>(ratio) * static_cast<double>(n)));
  drop = drop < 0 ? 0 : drop;
  return drop > n - 1 ? n - 1 : drop;
}

}  // namespace tf_nmt

#endif  // TF_NMT_GRAD_DROP_SAMPLE_H_
