// Host-side planning of a GradDrop launch over n (gradient, residual) spans: where each span sits
// in the concatenation, its blocks, and how the threshold is selected (exact, or which stratified
// sample). Shared by the GPU OpKernel (grad_drop_gpu_kernels.cc) and the stand-alone harness
// (tests/gpu/standalone/harness_capi.cu.cc), so the harness checks the plan production builds.
// No TensorFlow here: the harness compiles without it.
//
//   GradDropPlan plan = StartGradDropPlan(n, drop_ratio);
//   for each t: AddGradDropSpan(&plan, &spans[t], size_t);   // then set spans[t]'s pointers
//   if (plan.total == 0) threshold = EmptyGradDropThreshold(plan), no launch;
//   else FinishGradDropPlan(&plan, sample_fraction, seed, exact_below, min_sample), launch.
#ifndef TF_NMT_GRAD_DROP_PLAN_H_
#define TF_NMT_GRAD_DROP_PLAN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "grad_drop_gpu.h"
#include "grad_drop_sample.h"

namespace tf_nmt {

// A plan with no spans yet; drop_ratio <= 0 keeps everything (threshold 0).
inline GradDropPlan StartGradDropPlan(int num_spans, float drop_ratio) {
  GradDropPlan plan{};
  plan.num_spans = num_spans;
  plan.drop_ratio = drop_ratio;
  plan.keep_all = drop_ratio <= 0.0f;
  return plan;
}

// Appends a span of `size` entries: its offset in the concatenation and first block (blocks never
// straddle spans). The caller sets the gradient / residual / new_residual pointers; the outputs
// (phase 2) are cleared.
inline void AddGradDropSpan(GradDropPlan* plan, GradDropSpan* span, int64_t size) {
  span->size = size;
  span->offset = plan->total;
  span->first_block = plan->num_blocks;
  span->out_indices = nullptr;
  span->out_values = nullptr;
  plan->total += size;
  plan->num_blocks += (size + kGradDropGpuBlock - 1) / kGradDropGpuBlock;
}

// The threshold when there is nothing to drop (plan.total == 0), as the CPU kernel reports it.
inline float EmptyGradDropThreshold(const GradDropPlan& plan) {
  return plan.keep_all ? 0.0f : INFINITY;
}

// After the last span (plan.total > 0): exact selection when total <= exact_below or the sample
// would cover everything, else max(ceil(sample_fraction * total), min_sample) samples, stride
// total / samples, seeded by SplitMix64(seed) (as the CPU kernel, grad_drop_sample.h).
inline void FinishGradDropPlan(GradDropPlan* plan, float sample_fraction, int64_t seed,
                               int64_t exact_below, int64_t min_sample) {
  int64_t samples = static_cast<int64_t>(std::ceil(static_cast<double>(sample_fraction) *
                                                   static_cast<double>(plan->total)));
  samples = std::max<int64_t>(samples, min_sample);
  plan->exact = plan->total <= exact_below || samples >= plan->total;
  plan->samples = samples;
  plan->stride = static_cast<double>(plan->total) / static_cast<double>(samples);
  plan->base = SplitMix64(static_cast<uint64_t>(seed));
}

}  // namespace tf_nmt

#endif  // TF_NMT_GRAD_DROP_PLAN_H_
