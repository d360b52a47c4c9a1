// ops/common/fast_exp.hpp — e^x for float in plain arithmetic, so that loops calling it vectorise (internal to the
// CPU ops). GCC does not vectorise a loop that calls std::exp unless -ffast-math lets it call glibc's
// vector routines, which hetrain does not use (rounding must not depend on a compiler flag a site may
// change). Cephes' expf method: x = n·ln2 + r with |r| ≤ ln2/2, e^r by a degree-7 polynomial, 2^n
// by building the exponent bits. Largest relative error measured against double: about 1.5e-7 (2 ulp);
// test/ops/silu_test.cpp checks it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hetrain::ops::cpu {

// x is clamped to [-87, 89]: below, e^x is about 1.6e-38 instead of a denormal or 0; from about 88.4 up
// it is +inf (the exponent bits of 2^128), which float's e^x is from 88.73 on anyway. Enough for
// 1 / (1 + e^−x), which is then exactly 0 or 1.
inline float exp_vectorizable(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 89.0f ? 89.0f : x;
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;  // ln2 in two parts, so that n·ln2 is exact enough
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
// Double (the reference of gradient checks) keeps the library's exp.
inline double exp_vectorizable(double x) { return std::exp(x); }

}  // namespace hetrain::ops::cpu
