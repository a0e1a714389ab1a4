// Op definitions for the log and fixed-point quantisers and 4-bit packing.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

namespace {

// Output 0 has the shape of input 0; inputs [first_scalar, num_inputs) are scalars.
absl::Status SameShapeScalars(InferenceContext* c, int first_scalar) {
  ShapeHandle unused;
  for (int i = first_scalar; i < c->num_inputs(); ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  }
  c->set_output(0, c->input(0));
  for (int o = 1; o < c->num_outputs(); ++o) c->set_output(o, c->Scalar());
  return absl::OkStatus();
}

absl::Status ScalarOut(InferenceContext* c) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

constexpr char kModeAttr[] = "mode: {'unscaled', 'max', 'optimised'} = 'optimised'";
constexpr char kIterAttr[] = "iterations: int >= 0 = 10";
constexpr char kTypeAttr[] = "T: {float, half, bfloat16} = DT_FLOAT";

}  // namespace

#define TF_NMT_QUANT_OPS(PREFIX)                                                      \
  REGISTER_OP(PREFIX "QuantizeFit")                                                   \
      .Input("x: T")                                                                  \
      .Input("bits: int32")                                                           \
      .Output("scale: float")                                                         \
      .Attr(kTypeAttr)                                                                \
      .Attr(kModeAttr)                                                                \
      .Attr(kIterAttr)                                                                \
      .SetShapeFn(ScalarOut);                                                         \
  REGISTER_OP(PREFIX "QuantizeEncode")                                                \
      .Input("x: T")                                                                  \
      .Input("scale: float")                                                          \
      .Input("bits: int32")                                                           \
      .Output("codes: uint8")                                                         \
      .Attr(kTypeAttr)                                                                \
      .SetShapeFn([](InferenceContext* c) { return SameShapeScalars(c, 1); });        \
  REGISTER_OP(PREFIX "QuantizeDecode")                                                \
      .Input("codes: uint8")                                                          \
      .Input("scale: float")                                                          \
      .Input("bits: int32")                                                           \
      .Output("y: out_type")                                                          \
      .Attr("out_type: {float, half, bfloat16} = DT_FLOAT")                           \
      .SetShapeFn([](InferenceContext* c) { return SameShapeScalars(c, 1); });        \
  REGISTER_OP(PREFIX "Quantize")                                                      \
      .Input("x: T")                                                                  \
      .Input("bits: int32")                                                           \
      .Output("codes: uint8")                                                         \
      .Output("scale: float")                                                         \
      .Attr(kTypeAttr)                                                                \
      .Attr(kModeAttr)                                                                \
      .Attr(kIterAttr)                                                                \
      .SetShapeFn([](InferenceContext* c) { return SameShapeScalars(c, 1); });        \
  REGISTER_OP(PREFIX "QuantizeDequantize")                                            \
      .Input("x: T")                                                                  \
      .Input("bits: int32")                                                           \
      .Output("y: T")                                                                 \
      .Output("scale: float")                                                         \
      .Attr(kTypeAttr)                                                                \
      .Attr(kModeAttr)                                                                \
      .Attr(kIterAttr)                                                                \
      .SetShapeFn([](InferenceContext* c) { return SameShapeScalars(c, 1); });

TF_NMT_QUANT_OPS("Log")
TF_NMT_QUANT_OPS("Fixed")
#undef TF_NMT_QUANT_OPS

REGISTER_OP("PackNibbles")
    .Input("codes: uint8")
    .Output("packed: uint8")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(InferenceContext::kUnknownDim));
      return absl::OkStatus();
    })
    .Doc("Packs 4-bit codes (any shape, flattened) two per byte, low nibble first.");

REGISTER_OP("UnpackNibbles")
    .Input("packed: uint8")
    .Input("size: int64")
    .Output("codes: uint8")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
      c->set_output(0, c->Vector(InferenceContext::kUnknownDim));
      return absl::OkStatus();
    })
    .Doc("Inverse of PackNibbles: `size` 4-bit codes as a uint8 vector.");

}  // namespace tf_nmt
