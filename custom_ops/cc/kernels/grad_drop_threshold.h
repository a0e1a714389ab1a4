// Threshold selection for gradient dropping (shared by the per-tensor and global kernels).
//
// The candidates are |g + r| over one or more (gradient, residual) pairs, viewed as a single
// concatenated vector. The threshold is the value below which ~drop_ratio of the non-NaN
// candidates fall: exact (nth_element over all candidates) for small inputs, otherwise estimated
// from a seeded stratified sample. Entries with |g + r| >= threshold are kept.
#ifndef TF_NMT_GRAD_DROP_THRESHOLD_H_
#define TF_NMT_GRAD_DROP_THRESHOLD_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "parallel_blocks.h"

namespace tf_nmt {

template <typename T>
struct GradSpan {
  const T* gradient;
  const T* residual;
  int64_t size;
};

template <typename T>
inline float SumMagnitude(const GradSpan<T>& s, int64_t i) {
  const T sum = s.gradient[i] + s.residual[i];
  return std::fabs(static_cast<float>(sum));
}

// splitmix64: a small counter-based generator, so sample j depends only on (seed, j).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

struct ThresholdOptions {
  float drop_ratio;
  float sample_fraction;
  int64_t seed;
  int64_t exact_below;  // use exact selection when the total size is <= this
  int64_t min_sample;   // never sample fewer candidates than this
};

// Returns the ratio-quantile of `mags` (NaN-free); +inf when empty (nothing but NaN: keep none).
inline float Quantile(std::vector<float>* mags, float ratio) {
  if (mags->empty()) return std::numeric_limits<float>::infinity();
  const int64_t n = static_cast<int64_t>(mags->size());
  int64_t drop = static_cast<int64_t>(std::floor(static_cast<double>(ratio) * n));
  drop = std::min<int64_t>(std::max<int64_t>(drop, 0), n - 1);
  std::nth_element(mags->begin(), mags->begin() + drop, mags->end());
  return (*mags)[drop];
}

template <typename T>
float SelectThreshold(tensorflow::OpKernelContext* ctx, const std::vector<GradSpan<T>>& spans,
                      const ThresholdOptions& opt) {
  if (opt.drop_ratio <= 0.0f) return 0.0f;  // R = 0: keep every non-NaN entry
  std::vector<int64_t> offsets(spans.size() + 1, 0);
  for (size_t t = 0; t < spans.size(); ++t) offsets[t + 1] = offsets[t] + spans[t].size;
  const int64_t total = offsets.back();
  if (total == 0) return std::numeric_limits<float>::infinity();

  int64_t samples = static_cast<int64_t>(
      std::ceil(static_cast<double>(opt.sample_fraction) * static_cast<double>(total)));
  samples = std::max(samples, opt.min_sample);
  std::vector<float> mags;
  if (total <= opt.exact_below || samples >= total) {
    mags.reserve(total);
    for (const auto& s : spans) {
      for (int64_t i = 0; i < s.size; ++i) {
        const float a = SumMagnitude(s, i);
        if (!std::isnan(a)) mags.push_back(a);
      }
    }
    return Quantile(&mags, opt.drop_ratio);
  }
  // Sampled estimate, stratified: one seeded random index in each of `samples` equal strata
  // (lower variance than independent draws, and the indices come out sorted for locality).
  // Each sample is a cache miss, so the samples are split into small blocks across threads;
  // sample j depends only on (seed, j), so the result does not depend on the thread count.
  const uint64_t base = SplitMix64(static_cast<uint64_t>(opt.seed));
  const double stride = static_cast<double>(total) / static_cast<double>(samples);  // >= 1
  auto edge = [&](int64_t j) {
    return std::min(total, static_cast<int64_t>(static_cast<double>(j) * stride));
  };
  auto pick = [&](int64_t j) {
    const int64_t lo = edge(j), hi = std::max(lo + 1, edge(j + 1));
    const uint64_t h = SplitMix64(base + static_cast<uint64_t>(j));
    return std::min(total - 1, lo + static_cast<int64_t>((static_cast<unsigned __int128>(h) * (hi - lo)) >> 64));
  };
  constexpr int64_t kSampleBlock = 2048;
  mags.resize(samples);
  ForEachBlock(ctx, (samples + kSampleBlock - 1) / kSampleBlock, [&](int64_t b) {
    const int64_t lo = b * kSampleBlock, hi = std::min(samples, lo + kSampleBlock);
    size_t t = std::upper_bound(offsets.begin(), offsets.end(), pick(lo)) - offsets.begin() - 1;
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t at = pick(j);
      while (at >= offsets[t + 1]) ++t;
      mags[j] = SumMagnitude(spans[t], at - offsets[t]);
    }
  });
  mags.erase(std::remove_if(mags.begin(), mags.end(), [](float a) { return std::isnan(a); }),
             mags.end());
  return Quantile(&mags, opt.drop_ratio);
}

}  // namespace tf_nmt

#endif  // TF_NMT_GRAD_DROP_THRESHOLD_H_
