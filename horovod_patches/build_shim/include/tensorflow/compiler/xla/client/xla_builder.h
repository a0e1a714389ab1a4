// tf-nmt build shim: Horovod 0.28.1 includes the pre-TF-2.19 path of the XLA builder header.
// TensorFlow >= 2.19 ships it as xla/hlo/builder/xla_builder.h; forward to it.
#ifndef TF_NMT_HOROVOD_SHIM_XLA_BUILDER_H_
#define TF_NMT_HOROVOD_SHIM_XLA_BUILDER_H_
#include "xla/hlo/builder/xla_builder.h"
#endif  // TF_NMT_HOROVOD_SHIM_XLA_BUILDER_H_
