// The quantisers' scalar inputs `bits` and `scale`, read and checked on the host: one home for
// the CPU and GPU kernels, so both refuse bad input with the same messages.
#ifndef TF_NMT_QUANT_INPUTS_H_
#define TF_NMT_QUANT_INPUTS_H_

#include <cfloat>

#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/errors.h"

namespace tf_nmt {

// bits: an int32 scalar in 1..8.
inline tensorflow::Status ReadBits(const tensorflow::Tensor& t, int* bits) {
  if (!tensorflow::TensorShapeUtils::IsScalar(t.shape())) {
    return tensorflow::errors::InvalidArgument("bits must be a scalar, got shape ",
                                               t.shape().DebugString());
  }
  *bits = t.scalar<tensorflow::int32>()();
  if (*bits < 1 || *bits > 8) {
    return tensorflow::errors::InvalidArgument("bits must be in 1..8, got ", *bits);
  }
  return tensorflow::OkStatus();
}

// scale: a float scalar, finite and >= 0.
inline tensorflow::Status ReadScale(const tensorflow::Tensor& t, float* scale) {
  if (!tensorflow::TensorShapeUtils::IsScalar(t.shape())) {
    return tensorflow::errors::InvalidArgument("scale must be a scalar, got shape ",
                                               t.shape().DebugString());
  }
  *scale = t.scalar<float>()();
  if (!(*scale >= 0.0f && *scale <= FLT_MAX)) {
    return tensorflow::errors::InvalidArgument("scale must be finite and >= 0, got ", *scale);
  }
  return tensorflow::OkStatus();
}

}  // namespace tf_nmt

#endif  // TF_NMT_QUANT_INPUTS_H_
