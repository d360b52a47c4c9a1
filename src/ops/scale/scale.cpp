// ops/scale/scale.cpp — the scale's entry point and CPU implementation.
#include "ops/scale/scale.hpp"

namespace hetrain::ops {

Dispatch<ScaleFn> scale_impl("scale");

namespace {
void scale_cpu(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}
}  // namespace
HT_OP_IMPLEMENTATION(scale_impl, Device::CPU, scale_cpu);

void scale(const Tensor& x, float a) { scale_impl.on(common_device("scale", {&x}))(x.data(), a, x.numel()); }

}  // namespace hetrain::ops
