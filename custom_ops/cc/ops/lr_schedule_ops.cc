// Op definition for NmtLearningRate (warm-up + inverse-sqrt family of LR schedules).
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

REGISTER_OP("NmtLearningRate")
    .Input("step: S")
    .Output("learning_rate: float")
    .Attr("S: {int32, int64, float}")
    .Attr("schedule: {'warmup_inverse_sqrt', 'inverse_sqrt', 'linear_warmup'}")
    .Attr("peak_lr: float")
    .Attr("warmup_steps: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Learning rate at 0-based step, with s = max(step + 1, 1) and w = warmup_steps. Schedules are
warm-up then inverse-sqrt (peak_lr * min(s / w, sqrt(w / s))), inverse-sqrt
(peak_lr * sqrt(w / max(s, w))) and linear warm-up (peak_lr * min(1, s / w)).
)doc");

}  // namespace tf_nmt
