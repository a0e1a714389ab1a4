// Op definitions for the log-space dot-product kernels (lowprec_dot.h): encoding activations to
// 4-bit codes with a fixed scale and matrix multiplies on codes. (Their Table 7.5 microbenchmark
// ops are experiment code, in experiments/lowprec/cc, built into a library of their own.)
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_nmt {

using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

namespace {

constexpr char kVariantAttr[] = "scheme: {'shift16', 'lut8'}";
constexpr char kImplAttr[] = "impl: {'auto', 'simd', 'scalar'} = 'auto'";

// a [M, K] and b [N, K] -> [M, N]; inputs from index 2 on are scalars.
absl::Status MatMulShape(InferenceContext* c) {
  ShapeHandle a, b, unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
  DimensionHandle k;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(a, 1), c->Dim(b, 1), &k));
  for (int i = 2; i < c->num_inputs(); ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  }
  c->set_output(0, c->Matrix(c->Dim(a, 0), c->Dim(b, 0)));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("LowprecEncode")
    .Input("x: T")
    .Input("scale: float")
    .Output("codes: uint8")
    .Attr("T: {float, half, bfloat16} = DT_FLOAT")
    .Attr(kVariantAttr)
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    })
    .Doc(R"doc(
4-bit codes (sign << 3) | k of x for a fixed scale S. shift16: the LogQuantizeEncode codes
(bits = 4, centres S 2^-k). lut8: centres S b^-k with b = 256^(1/14), nearest in normal space,
ties to the smaller centre. 0 and NaN get the smallest magnitude, +-Inf the largest.
)doc");

REGISTER_OP("LowprecMatMulAccum")
    .Input("a_codes: uint8")
    .Input("b_codes: uint8")
    .Output("acc: int32")
    .Attr(kVariantAttr)
    .Attr(kImplAttr)
    .SetShapeFn(MatMulShape)
    .Doc(R"doc(
Integer accumulators of A B^T for 4-bit codes, one code per byte: a_codes [M, K], b_codes
[N, K]. acc[i, j] = sum_t (-1)^(sa XOR sb) P[ka + kb] with P[e] = 2^(14 - e) (shift16) or
round(255 2^(-4e/7)) (lut8). impl: 'auto' uses AVX-512 when the CPU has it and
TF_NMT_LOWPREC_SCALAR is unset; 'scalar' forces the portable loop (same integers).
)doc");

REGISTER_OP("LowprecMatMul")
    .Input("a_codes: uint8")
    .Input("b_codes: uint8")
    .Input("scale_a: float")
    .Input("scale_b: float")
    .Output("y: float")
    .Attr(kVariantAttr)
    .Attr(kImplAttr)
    .SetShapeFn(MatMulShape)
    .Doc(R"doc(
float32(acc) * c with acc from LowprecMatMulAccum and c = (scale_a * scale_b) * 2^-14 (shift16)
or (scale_a * scale_b) / 255 (lut8), each step in float32.
)doc");

REGISTER_OP("LowprecSimdAvailable")
    .Output("available: bool")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc("True when this CPU runs the AVX-512 F/BW/VBMI/VNNI kernels.");

REGISTER_OP("LowprecResolveImpl")
    .Output("simd: bool")
    .Output("allowed_by_env: bool")
    .Attr(kImplAttr)
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
The code path LowprecMatMul / LowprecMatMulAccum with this `impl` take now (the same resolution,
read afresh per call): simd = true for the AVX-512 kernels, false for the scalar loop; and
whether $TF_NMT_LOWPREC_SCALAR leaves 'auto' free to take SIMD. Errors as those ops for
impl='simd' on a CPU without AVX-512 F/BW/VBMI/VNNI.
)doc");

}  // namespace tf_nmt
