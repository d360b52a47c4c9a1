// ops/nonfinite/nonfinite.cpp — the NaN/Inf count's entry point and CPU implementation.
#include "ops/nonfinite/nonfinite.hpp"

#include <cmath>

namespace hetrain::ops {

Dispatch<CountNonfiniteFn> count_nonfinite_impl("count_nonfinite");

namespace {
int64_t count_nonfinite_cpu(const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(x[i]) ? 0 : 1;
  return bad;
}
}  // namespace
HT_OP_IMPLEMENTATION(count_nonfinite_impl, Device::CPU, count_nonfinite_cpu);

int64_t count_nonfinite(const Tensor& t) {
  if (t.numel() == 0) return 0;  // also an undefined tensor, which has no device to ask
  return count_nonfinite_impl.on(common_device("count_nonfinite", {&t}))(t.data(), t.numel());
}

}  // namespace hetrain::ops
