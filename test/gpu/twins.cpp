// test/gpu/twins.cpp — CPU twins of sgd_update, normalize_crop_flip, count_nonfinite and the 16-bit casts
// (see twins.hpp).
#include "twins.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace gpu_test {

void sgd_update_twin(float* param, float* velocity, const float* grad, const float* decay_mask,
                     const float* lr_group, int64_t n, const hetrain::cuda::SgdStep& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float lr = lr_group && lr_group[i] != 0.0f ? s.group_lr : s.lr;
    const float wd = decay_mask ? s.weight_decay * decay_mask[i] : s.weight_decay;
    const float g = wd != 0.0f ? s.grad_scale * grad[i] + wd * param[i] : s.grad_scale * grad[i];
    float step = g;
    if (s.momentum != 0.0f) {
      velocity[i] = s.momentum * velocity[i] + g;
      step = s.nesterov ? g + s.momentum * velocity[i] : velocity[i];
    }
    param[i] -= lr * step;
  }
}

int64_t count_nonfinite_twin(const float* x, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += !std::isfinite(x[i]);
  return c;
}

// In double: x / ulp is exact (a power-of-two scaling of a float), and nearbyint rounds to nearest, ties to
// even, in the default rounding mode — an even quotient is an even last significand bit.
float round_to_16bit_twin(float x, hetrain::Precision precision) {
  const bool bf16 = precision == hetrain::Precision::BF16;
  const int digits = bf16 ? 8 : 11;                   // significand bits, the implicit one included
  const int emin = bf16 ? -126 : -14;                 // exponent of the smallest normal value
  const double max_finite = bf16 ? 0x1.FEp127 : 65504.0;
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  int e = 0;
  std::frexp(double(x), &e);  // |x| = f·2^e with f in [0.5, 1): the leading bit is 2^(e-1)
  const double ulp = std::ldexp(1.0, std::max(e - 1, emin) - (digits - 1));
  const double r = std::nearbyint(double(x) / ulp) * ulp;
  if (std::abs(r) > max_finite) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return float(std::copysign(r, double(x)));  // keeps the sign of a value rounded to zero
}

float decode_16bit_twin(uint16_t bits, hetrain::Precision precision) {
  if (precision == hetrain::Precision::BF16) {
    const uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const int exp = (bits >> 10) & 31, man = bits & 1023;
  float v;
  if (exp == 0) v = std::ldexp(float(man), -24);  // zero and subnormals
  else if (exp == 31) v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(float(1024 + man), exp - 25);
  return (bits & 0x8000) ? -v : v;
}

}  // namespace gpu_test
