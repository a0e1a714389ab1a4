// Op definitions for gradient dropping (GradDrop, GradDropGlobal) and 1-bit stacking.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

namespace {

// Shapes for N (gradient, residual) pairs followed by three scalars.
absl::Status GradDropShape(InferenceContext* c, int n) {
  ShapeHandle unused;
  for (int i = 0; i < 3; ++i) TF_RETURN_IF_ERROR(c->WithRank(c->input(2 * n + i), 0, &unused));
  for (int t = 0; t < n; ++t) {
    ShapeHandle merged;
    TF_RETURN_IF_ERROR(c->Merge(c->input(t), c->input(n + t), &merged));
    c->set_output(t, c->Vector(InferenceContext::kUnknownDim));
    c->set_output(n + t, c->Vector(InferenceContext::kUnknownDim));
    c->set_output(2 * n + t, merged);
  }
  c->set_output(3 * n, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("GradDrop")
    .Input("gradient: T")
    .Input("residual: T")
    .Input("drop_ratio: float")
    .Input("sample_fraction: float")
    .Input("seed: int64")
    .Output("indices: int64")
    .Output("values: T")
    .Output("new_residual: T")
    .Output("threshold: float")
    .Attr("T: {float, half, bfloat16} = DT_FLOAT")
    .Attr("exact_below: int >= 0 = 65536")
    .Attr("min_sample: int >= 1 = 16384")
    .SetShapeFn([](InferenceContext* c) { return GradDropShape(c, 1); })
    .Doc(R"doc(
Error-feedback gradient dropping with a per-tensor threshold.

sum = gradient + residual. Keeps entries with |sum| >= threshold, where ~drop_ratio of the
non-NaN |sum| fall below threshold (exact when size <= exact_below, else estimated from a seeded stratified
sample of max(ceil(sample_fraction * size), min_sample) entries). indices are flat int64 indices
in increasing order, values the kept sums, new_residual is sum with kept entries set to 0.
)doc");

REGISTER_OP("GradDropGlobal")
    .Input("gradients: N * T")
    .Input("residuals: N * T")
    .Input("drop_ratio: float")
    .Input("sample_fraction: float")
    .Input("seed: int64")
    .Output("indices: N * int64")
    .Output("values: N * T")
    .Output("new_residuals: N * T")
    .Output("threshold: float")
    .Attr("N: int >= 1")
    .Attr("T: {float, half, bfloat16} = DT_FLOAT")
    .Attr("exact_below: int >= 0 = 65536")
    .Attr("min_sample: int >= 1 = 16384")
    .SetShapeFn([](InferenceContext* c) {
      int n = 0;
      TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
      return GradDropShape(c, n);
    })
    .Doc("GradDrop over N tensors with one threshold shared by all of them.");

REGISTER_OP("OneBitQuantize")
    .Input("indices: int64")
    .Input("values: T")
    .Input("residual: T")
    .Input("num_columns: int64")
    .Output("quantized_values: T")
    .Output("new_residual: T")
    .Output("positive_means: T")
    .Output("negative_means: T")
    .Attr("T: {float, half, bfloat16} = DT_FLOAT")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle idx, val, merged, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &idx));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &val));
      TF_RETURN_IF_ERROR(c->Merge(idx, val, &merged));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 0, &unused));
      c->set_output(0, merged);
      c->set_output(1, c->input(2));
      c->set_output(2, c->Vector(InferenceContext::kUnknownDim));
      c->set_output(3, c->Vector(InferenceContext::kUnknownDim));
      return absl::OkStatus();
    })
    .Doc(R"doc(
1-bit quantisation of kept GradDrop entries (Seide et al.), stacked after dropping.

Column of flat index i is i % num_columns. Kept positive values become the mean of the kept
positive values of their column, negatives the mean of the negatives, zeros stay zero. The
error (value - quantised) is added to residual at that index.
)doc");

}  // namespace tf_nmt
