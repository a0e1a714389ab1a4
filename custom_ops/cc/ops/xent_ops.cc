// Op definitions for the label-smoothed softmax cross-entropy of the training loss, forward and
// gradient, each one pass over the [N, V] logits.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

namespace {

// logits [N, V] and labels [N]: the shared N.
absl::Status RowsOf(InferenceContext* c, DimensionHandle* rows) {
  ShapeHandle logits, labels;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &logits));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &labels));
  return c->Merge(c->Dim(logits, 0), c->Dim(labels, 0), rows);
}

}  // namespace

REGISTER_OP("SmoothedSoftmaxXent")
    .Input("logits: T")
    .Input("labels: int32")
    .Output("loss: float")
    .Output("logsumexp: float")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr("smoothing: float")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle rows;
      TF_RETURN_IF_ERROR(RowsOf(c, &rows));
      c->set_output(0, c->Vector(rows));
      c->set_output(1, c->Vector(rows));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Per-row label-smoothed cross-entropy of logits [N, V] against labels [N] in [0, V):
loss = logsumexp(x) - (1 - smoothing) * x[label] - smoothing * mean(x), i.e. -sum_v q_v log
softmax(x)_v with q = (1 - smoothing) * onehot(label) + smoothing / V. Also returns logsumexp(x)
for the gradient op. bfloat16 logits (mixed precision) are read as float and everything is
computed in float.
)doc");

REGISTER_OP("SmoothedSoftmaxXentGrad")
    .Input("logits: T")
    .Input("labels: int32")
    .Input("logsumexp: float")
    .Input("upstream: float")
    .Output("grad: T")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr("smoothing: float")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle rows;
      TF_RETURN_IF_ERROR(RowsOf(c, &rows));
      ShapeHandle vec;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &vec));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(vec, 0), rows, &rows));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &vec));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(vec, 0), rows, &rows));
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Gradient of SmoothedSoftmaxXent: grad[i] = upstream[i] * (softmax(x_i) - q_i), the softmax
recomputed from the forward's logsumexp; computed in float and, for bfloat16 logits, rounded
once to bfloat16.
)doc");

REGISTER_OP("RowArgmax")
    .Input("logits: T")
    .Output("index: int32")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle logits;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &logits));
      c->set_output(0, c->Vector(c->Dim(logits, 0)));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The index of each row's largest logit (the first one on ties), as tf.argmax(logits, -1) for
rows without NaN, in one vectorised pass: the training accuracy metric's argmax over [N, V].
)doc");

}  // namespace tf_nmt
