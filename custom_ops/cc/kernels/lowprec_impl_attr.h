// The `impl` attribute of the log-space ops ('auto', 'simd', 'scalar'): which code path a
// kernel runs. Shared by lowprec_kernels.cc and the Table 7.5 microbenchmark ops
// (experiments/lowprec/cc/lowprec_bench_ops.cc), so both dispatch alike.
#ifndef TF_NMT_LOWPREC_IMPL_ATTR_H_
#define TF_NMT_LOWPREC_IMPL_ATTR_H_

#include <string>

#include "lowprec_dot.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_nmt {
namespace lowprec {

// Resolves impl (and $TF_NMT_LOWPREC_SCALAR for 'auto') to SIMD (*simd = true) or scalar;
// 'simd' on a CPU without AVX-512 F/BW/VBMI/VNNI is an InvalidArgument error.
inline tensorflow::Status ResolveImpl(const std::string& impl, bool* simd) {
  if (impl == "scalar") {
    *simd = false;
  } else if (impl == "simd") {
    if (!SimdAvailable()) {
      return tensorflow::errors::InvalidArgument(
          "impl='simd' needs AVX-512 F/BW/VBMI/VNNI, which this CPU lacks");
    }
    *simd = true;
  } else {
    *simd = SimdAvailable() && SimdAllowedByEnv();
  }
  return tensorflow::OkStatus();
}

}  // namespace lowprec
}  // namespace tf_nmt

#endif  // TF_NMT_LOWPREC_IMPL_ATTR_H_
