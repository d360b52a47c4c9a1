// ops/ema/ema.cpp — the moving average's entry point and CPU loop.
#include "ops/ema/ema.hpp"

namespace hetrain::ops {

Dispatch<EmaUpdateFn> ema_update_impl("ema_update");

namespace {
void ema_update_cpu(float* avg, const float* x, float decay, int64_t n) {
  const float keep = decay, take = 1.0f - decay;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) avg[i] = avg[i] * keep + take * x[i];
}
}  // namespace
HT_OP_IMPLEMENTATION(ema_update_impl, Device::CPU, ema_update_cpu);

void ema_update(const Tensor& avg, const Tensor& x, float decay) {
  HT_CHECK(decay >= 0.0f && decay <= 1.0f, "ema_update: decay must be in [0, 1], got ", decay);
  check_shape("ema_update", "model values", x, avg.shape());
  ema_update_impl.on(common_device("ema_update", {&avg, &x}))(avg.data(), x.data(), decay, avg.numel());
}

}  // namespace hetrain::ops
