// Kernel for NmtLearningRate: the warm-up / inverse-sqrt schedules computed from the step.
//
// Uses the same float32 operations, in the same order, as tf_nmt.training.schedules, so the
// op and the Python schedules agree. Tiny scalar op: runs on host memory on every device.
#include <algorithm>
#include <cmath>
#include <string>

#include "tensorflow/core/framework/op_kernel.h"

namespace tf_nmt {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShapeUtils;
namespace errors = tensorflow::errors;

enum class Schedule { kWarmupInverseSqrt, kInverseSqrt, kLinearWarmup };

template <typename S>
class LearningRateOp : public OpKernel {
 public:
  explicit LearningRateOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string name;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("schedule", &name));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("peak_lr", &peak_lr_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("warmup_steps", &warmup_steps_));
    OP_REQUIRES(ctx, warmup_steps_ >= 1.0f,
                errors::InvalidArgument("warmup_steps must be >= 1, got ", warmup_steps_));
    if (name == "warmup_inverse_sqrt") schedule_ = Schedule::kWarmupInverseSqrt;
    if (name == "inverse_sqrt") schedule_ = Schedule::kInverseSqrt;
    if (name == "linear_warmup") schedule_ = Schedule::kLinearWarmup;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& step_t = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(step_t.shape()),
                errors::InvalidArgument("step must be a scalar, got shape ",
                                        step_t.shape().DebugString()));
    const float s = std::max(static_cast<float>(step_t.scalar<S>()()) + 1.0f, 1.0f);
    const float w = warmup_steps_;
    float factor = 1.0f;
    switch (schedule_) {
      case Schedule::kWarmupInverseSqrt:
        factor = std::min(s / w, std::sqrt(w / s));
        break;
      case Schedule::kInverseSqrt:
        factor = std::sqrt(w / std::max(s, w));
        break;
      case Schedule::kLinearWarmup:
        factor = std::min(1.0f, s / w);
        break;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<float>()() = peak_lr_ * factor;
  }

 private:
  Schedule schedule_ = Schedule::kWarmupInverseSqrt;
  float peak_lr_ = 0.0f;
  float warmup_steps_ = 1.0f;
};

#define TF_NMT_REGISTER_LR(S)                                                           \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("NmtLearningRate").Device(tensorflow::DEVICE_CPU).TypeConstraint<S>("S"),    \
      LearningRateOp<S>);                                                               \
  REGISTER_KERNEL_BUILDER(Name("NmtLearningRate")                                       \
                              .Device(tensorflow::DEVICE_GPU)                           \
                              .HostMemory("step")                                       \
                              .HostMemory("learning_rate")                              \
                              .TypeConstraint<S>("S"),                                  \
                          LearningRateOp<S>);

TF_NMT_REGISTER_LR(tensorflow::int32);
TF_NMT_REGISTER_LR(tensorflow::int64);
TF_NMT_REGISTER_LR(float);
#undef TF_NMT_REGISTER_LR

}  // namespace tf_nmt
