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

#include "grad_drop_sample.h"
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
  const int64_t drop = QuantileRank(ratio, static_cast<int64_t>(mags->size()));
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
  // The sampler (grad_drop_sample.h) is shared with the CUDA kernel.
  const StratifiedSampler sampler{total, static_cast<double>(total) / static_cast<double>(samples),
                                  SplitMix64(static_cast<uint64_t>(opt.seed))};  // stride >= 1
  auto pick = [&](int64_t j) { return sampler.Pick(j); };
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
