// Op definitions for the fused layer normalisation over the last axis (forward and gradient).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("FusedLayerNorm")
    .Input("x: T")
    .Input("gamma: float")
    .Input("beta: float")
    .Output("y: T")
    .Output("mean: float")
    .Output("rstd: float")
    .Attr("T: {float, bfloat16}")
    .Attr("epsilon: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, rows, param;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &param));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &param));
      TF_RETURN_IF_ERROR(c->Subshape(x, 0, -1, &rows));
      c->set_output(0, x);
      c->set_output(1, rows);
      c->set_output(2, rows);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Layer normalisation over the last axis in one pass per row: with mean and variance of each row
(two-pass, in float), y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(variance + epsilon).
bfloat16 rows are computed in float and rounded back (as Keras does under mixed precision).
mean and rstd (one per row, float) are kept for the gradient.
)doc");

REGISTER_OP("FusedLayerNormGrad")
    .Input("dy: T")
    .Input("x: T")
    .Input("gamma: float")
    .Input("mean: float")
    .Input("rstd: float")
    .Output("dx: T")
    .Output("dgamma: float")
    .Output("dbeta: float")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, param;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(1), 1, &x));
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), x, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &param));
      c->set_output(0, x);
      c->set_output(1, param);
      c->set_output(2, param);
      return absl::OkStatus();
    })
    .Doc(R"doc(
The gradient of FusedLayerNorm from its saved mean and rstd: with xhat = (x - mean) * rstd and
g = dy * gamma, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row; dgamma and dbeta are
the column sums of dy * xhat and dy, added over fixed blocks of rows in a fixed order, so they do
not depend on the number of threads.
)doc");

}  // namespace tf_nmt
