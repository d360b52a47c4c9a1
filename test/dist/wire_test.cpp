// The 16-bit formats of --reduce-precision: every 16-bit value survives widening and narrowing, and
// narrowing rounds to nearest with ties to even, as CUDA's __float2bfloat16_rn / __float2half_rn do.
// References: the compiler's own _Float16 conversion for FP16; for BF16 (float's upper half) the two
// neighbours of a value chosen between in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "hetrain/dist/wire.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint16_t fp16_reference(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

// x's two bfloat16 neighbours toward and away from zero; the nearer wins, a tie goes to the even one.
// Beyond the largest bfloat16 by half a step or more, IEEE rounding gives Inf, which is what the
// neighbour above the largest finite one is.
uint16_t bf16_reference(float x) {
  const uint32_t toward_zero = bits_of(x) & 0xFFFF0000u;
  const uint32_t away = toward_zero + 0x10000u;
  const double lo = double(float_of(toward_zero));
  // The step above the largest finite bfloat16 (exponent 254) is where Inf stands in for 2^128.
  const double hi = (toward_zero & 0x7F800000u) == 0x7F000000u && (away & 0x7F800000u) == 0x7F800000u
                        ? std::copysign(std::ldexp(1.0, 128), double(x))
                        : double(float_of(away));
  const double d_lo = std::fabs(double(x) - lo), d_hi = std::fabs(hi - double(x));
  if (d_lo < d_hi) return uint16_t(toward_zero >> 16);
  if (d_hi < d_lo) return uint16_t(away >> 16);
  return uint16_t(((toward_zero >> 16) & 1u) ? away >> 16 : toward_zero >> 16);
}
}  // namespace

TEST(Wire, NamesParseAndBadValueIsNamed) {
  EXPECT_EQ(parse_wire("fp32"), Wire::FP32);
  EXPECT_EQ(parse_wire("BF16"), Wire::BF16);
  EXPECT_EQ(parse_wire("fp16"), Wire::FP16);
  EXPECT_STREQ(wire_name(Wire::BF16), "bf16");
  try {
    parse_wire("int8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--reduce-precision"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(narrow_to_wire(1.0f, Wire::FP32), Error);
}

// Every 16-bit pattern, widened to float and narrowed again, is itself (NaNs stay NaN).
TEST(Wire, EveryValueSurvivesTheRoundTrip) {
  for (Wire w : {Wire::BF16, Wire::FP16}) {
    int64_t wrong = 0;
    for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
      const float x = widen_from_wire(uint16_t(h), w);
      const uint16_t back = narrow_to_wire(x, w);
      if (std::isnan(x))
        wrong += !std::isnan(widen_from_wire(back, w));
      else
        wrong += back != h;
    }
    EXPECT_EQ(wrong, 0) << wire_name(w);
  }
  EXPECT_EQ(widen_from_wire(0x3C00, Wire::FP16), 1.0f);
  EXPECT_EQ(widen_from_wire(0x7BFF, Wire::FP16), 65504.0f);
  EXPECT_EQ(widen_from_wire(0x0001, Wire::FP16), std::ldexp(1.0f, -24));
  EXPECT_EQ(widen_from_wire(0x3F80, Wire::BF16), 1.0f);
}

// Ties to even, overflow to Inf, subnormals and signs, then a million values spread over every exponent.
TEST(Wire, NarrowingRoundsToNearestEven) {
  const float cases[] = {1.0f + std::ldexp(1.0f, -8),  1.0f + 3 * std::ldexp(1.0f, -8), 1.0f + std::ldexp(1.0f, -11),
                         1.0f + 3 * std::ldexp(1.0f, -11), 65504.0f, 65519.99f, 65520.0f, -70000.0f,
                         std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), std::ldexp(1.0f, -14) * 0.99999f,
                         std::numeric_limits<float>::max(), -0.0f, std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::denorm_min()};
  for (float x : cases) {
    EXPECT_EQ(narrow_to_wire(x, Wire::FP16), fp16_reference(x)) << x;
    EXPECT_EQ(narrow_to_wire(x, Wire::BF16), bf16_reference(x)) << x;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, 0xFFFFFFFFu);
  int64_t wrong16 = 0, wrong_bf = 0;
  std::vector<float> xs;
  for (int i = 0; i < 1000000; ++i) {
    const float x = float_of(any(rng));
    if (std::isnan(x)) continue;
    xs.push_back(x);
    wrong16 += narrow_to_wire(x, Wire::FP16) != fp16_reference(x);
    wrong_bf += narrow_to_wire(x, Wire::BF16) != bf16_reference(x);
  }
  EXPECT_EQ(wrong16, 0);
  EXPECT_EQ(wrong_bf, 0);
  // The buffer calls do what the one-value calls do.
  for (Wire w : {Wire::BF16, Wire::FP16}) {
    std::vector<uint16_t> narrow(xs.size());
    std::vector<float> wide(xs.size());
    narrow_to_wire(xs.data(), narrow.data(), int64_t(xs.size()), w);
    widen_from_wire(narrow.data(), wide.data(), int64_t(xs.size()), w);
    int64_t differ = 0;
    for (size_t i = 0; i < xs.size(); ++i)
      differ += narrow[i] != narrow_to_wire(xs[i], w) || bits_of(wide[i]) != bits_of(widen_from_wire(narrow[i], w));
    EXPECT_EQ(differ, 0) << wire_name(w);
  }
}
