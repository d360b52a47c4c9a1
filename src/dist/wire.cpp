// The 16-bit formats of --reduce-precision, in software: the CPU targets hetrain builds for (x86-64-v2)
// have no F16C conversion instructions, and a conversion here is a few integer operations per value, far
// cheaper than sending it.
#include "hetrain/dist/wire.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "hetrain/error.hpp"

namespace hetrain::dist {
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

uint16_t to_bf16(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);                     // ties to even; overflow gives Inf
}
float from_bf16(uint16_t h) { return float_of(uint32_t(h) << 16); }

uint16_t to_fp16(float x) {
  const uint32_t u = bits_of(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return uint16_t(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));  // NaN, Inf
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // 65520 and above round to Inf (65504 is the largest)
  if (a < 0x38800000u) {
    // Below 2^-14, half's smallest normal: a subnormal m·2^-24. Scaling by 2^24 is exact, and nearbyint
    // rounds to nearest even; m = 1024 is the smallest normal's encoding, so it needs no special case.
    return uint16_t(sign | uint32_t(std::nearbyint(float_of(a) * 16777216.0f)));
  }
  // Drop 13 mantissa bits with ties to even (a carry moves into the exponent, as it should), then rebias
  // the exponent from 127 to 15.
  const uint32_t rounded = a + 0x0FFFu + ((a >> 13) & 1u);
  return uint16_t(sign | ((rounded >> 13) - (uint32_t(127 - 15) << 10)));
}
float from_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: exact in float
    const float v = float(mantissa) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exponent == 31) return float_of(sign | 0x7F800000u | (mantissa << 13));
  return float_of(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}
}  // namespace

const char* wire_name(Wire w) {
  switch (w) {
    case Wire::FP32: return "fp32";
    case Wire::BF16: return "bf16";
    case Wire::FP16: return "fp16";
  }
  return "?";
}

Wire parse_wire(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (Wire w : {Wire::FP32, Wire::BF16, Wire::FP16})
    if (t == wire_name(w)) return w;
  HT_THROW("--reduce-precision must be fp32, bf16 or fp16, got ", quoted(text));
}

uint16_t narrow_to_wire(float x, Wire w) {
  HT_CHECK(is_16bit(w), "internal: narrow_to_wire to ", wire_name(w));
  return w == Wire::BF16 ? to_bf16(x) : to_fp16(x);
}

float widen_from_wire(uint16_t h, Wire w) {
  HT_CHECK(is_16bit(w), "internal: widen_from_wire from ", wire_name(w));
  return w == Wire::BF16 ? from_bf16(h) : from_fp16(h);
}

namespace {
// The format's two conversions, chosen once per buffer rather than once per value.
struct Bf16 {
  static uint16_t narrow(float x) { return to_bf16(x); }
  static float widen(uint16_t h) { return from_bf16(h); }
};
struct Fp16 {
  static uint16_t narrow(float x) { return to_fp16(x); }
  static float widen(uint16_t h) { return from_fp16(h); }
};

template <typename F>
void narrow_all(const float* in, uint16_t* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) out[i] = F::narrow(in[i]);
}

template <typename F>
void widen_all(const uint16_t* in, float* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) out[i] = F::widen(in[i]);
}

template <typename F>
void sum_all(const uint16_t* blocks, int64_t ranks, int64_t block, uint16_t* out) {
#pragma omp parallel for schedule(static) if (block > (1 << 16))
  for (int64_t j = 0; j < block; ++j) {
    float sum = 0.0f;
    for (int64_t r = 0; r < ranks; ++r) sum += F::widen(blocks[r * block + j]);
    out[j] = F::narrow(sum);
  }
}
}  // namespace

void narrow_to_wire(const float* in, uint16_t* out, int64_t n, Wire w) {
  HT_CHECK(is_16bit(w), "internal: narrow_to_wire to ", wire_name(w));
  w == Wire::BF16 ? narrow_all<Bf16>(in, out, n) : narrow_all<Fp16>(in, out, n);
}

void widen_from_wire(const uint16_t* in, float* out, int64_t n, Wire w) {
  HT_CHECK(is_16bit(w), "internal: widen_from_wire from ", wire_name(w));
  w == Wire::BF16 ? widen_all<Bf16>(in, out, n) : widen_all<Fp16>(in, out, n);
}

void sum_on_wire(const uint16_t* blocks, int64_t ranks, int64_t block, uint16_t* out, Wire w) {
  HT_CHECK(is_16bit(w), "internal: sum_on_wire in ", wire_name(w));
  w == Wire::BF16 ? sum_all<Bf16>(blocks, ranks, block, out) : sum_all<Fp16>(blocks, ranks, block, out);
}

}  // namespace hetrain::dist
