// Op definition for seeded dropout: the keep mask is a hash of (seed, element index), so the
// gradient is the same op applied to the upstream gradient with the same seed (no mask stored).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("SeededDropout")
    .Input("x: T")
    .Input("seed: int64")
    .Output("y: T")
    .Attr("T: {float, bfloat16, half}")
    .Attr("rate: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle seed;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &seed));
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Inverted dropout with a counter-based mask: y[i] = x[i] / (1 - rate) where keep(seed, i), else 0.
keep(seed, i) compares 32 bits of SplitMix64's output for counter seed + (i + 1) * golden-gamma
with rate * 2^32, so the mask depends only on the seed and the flat index (not on threads or
SIMD width). Applying the op to dy with the same seed gives the gradient.
)doc");

}  // namespace tf_nmt
