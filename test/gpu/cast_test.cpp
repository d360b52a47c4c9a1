// test/gpu/cast_test.cpp — the 16-bit casts of src/cuda/cast.cu (cuda::cast_to_16bit, cast_from_16bit,
// accumulate_16bit): the twin against hand-worked values (runs everywhere), then the kernels against the
// twin, bit for bit — known values and their bit patterns, every 16-bit pattern there is, random values with
// ties, and the accumulation into float. Exact comparisons throughout: rounding to nearest even has one
// right answer, and a float add is the same on both sides.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gpu_test_util.hpp"
#include "twins.hpp"

using namespace hetrain;

namespace {
const float kInf = std::numeric_limits<float>::infinity();

// Same float, or both NaN; -0 and +0 differ (the sign must survive the cast).
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

struct Known {
  float in, out;  // out: the value after the cast, widened back
};
// Worked by hand. bfloat16 keeps 8 significand bits (ulp at 1: 2^-7), IEEE half 11 (ulp at 1: 2^-10; largest
// 65504 = (2 - 2^-10)·2^15, so from 65520, half-way to 2^16, a value rounds to Inf; smallest subnormal 2^-24).
std::vector<Known> known_values(Precision p) {
  const float h = std::ldexp(1.0f, p == Precision::BF16 ? -8 : -11);  // half an ulp at 1
  std::vector<Known> v = {
      {1.0f + h / 2, 1.0f},                              // below the half-way point
      {1.0f + h, 1.0f},                                  // a tie, to the even neighbour 1
      {1.0f + 3 * h, 1.0f + 4 * h},                      // a tie between odd 1 + 2h and even 1 + 4h
      {1.0f + h + h / 4096, 1.0f + 2 * h},               // just above the tie
      {-(1.0f + h + h / 4096), -(1.0f + 2 * h)},         // the same with a sign
      {-0.0f, -0.0f}, {kInf, kInf}, {-kInf, -kInf}, {std::nanf(""), std::nanf("")}};
  if (p == Precision::BF16) {
    v.push_back({std::ldexp(1.0f, -9) + 1.0f, 1.0f});   // 1 + 2^-9: a quarter ulp
    v.push_back({FLT_MAX, kInf});                       // past half-way from 0x1.FEp127 to 2^128
    v.push_back({0x1.FEp127f, 0x1.FEp127f});            // the largest finite bfloat16
  } else {
    v.push_back({65504.0f, 65504.0f});
    v.push_back({65519.0f, 65504.0f});                  // below half-way: stays finite
    v.push_back({65520.0f, kInf});                      // half-way to 2^16: a tie to the even 2^16, out of range
    v.push_back({-70000.0f, -kInf});
    v.push_back({1.0e6f, kInf});
    v.push_back({std::ldexp(1.0f, -24), std::ldexp(1.0f, -24)});      // smallest subnormal
    v.push_back({std::ldexp(1.0f, -25), 0.0f});                       // a tie between 0 and 2^-24: 0
    v.push_back({3 * std::ldexp(1.0f, -25), std::ldexp(1.0f, -23)});  // a tie between 2^-24 and 2^-23: 2^-23
    v.push_back({1.0e-8f, 0.0f});
  }
  return v;
}

// Device round trip: widen(narrow(x)) for every x; also returns the raw 16-bit patterns.
std::vector<float> device_round_trip(const std::vector<float>& x, Precision p, std::vector<uint16_t>* bits = nullptr) {
  cuda::DeviceBuffer<float> in(x.size()), back(x.size());
  cuda::DeviceBuffer<uint16_t> half(x.size());
  in.upload(x);
  cuda::cast_to_16bit(half.data(), in.data(), int64_t(x.size()), p, nullptr);
  cuda::cast_from_16bit(back.data(), half.data(), int64_t(x.size()), p, nullptr);
  if (bits) *bits = half.download();
  return back.download();
}
}  // namespace

TEST(CastTwin, KnownValues) {
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(p));
    for (const Known& k : known_values(p))
      EXPECT_TRUE(same(gpu_test::round_to_16bit_twin(k.in, p), k.out))
          << k.in << " → " << gpu_test::round_to_16bit_twin(k.in, p) << ", expected " << k.out;
    EXPECT_EQ(gpu_test::decode_16bit_twin(0x3F80, Precision::BF16), 1.0f);
    EXPECT_EQ(gpu_test::decode_16bit_twin(0x3C00, Precision::FP16), 1.0f);
    EXPECT_EQ(gpu_test::decode_16bit_twin(0x7BFF, Precision::FP16), 65504.0f);
    EXPECT_EQ(gpu_test::decode_16bit_twin(0x0001, Precision::FP16), std::ldexp(1.0f, -24));
  }
}

TEST(CudaCast, KnownValuesAndBits) {
  HT_REQUIRE_GPU();
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<float> in;
    for (const Known& k : known_values(p)) in.push_back(k.in);
    const std::vector<float> got = device_round_trip(in, p);
    const std::vector<Known> want = known_values(p);
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_TRUE(same(got[i], want[i].out)) << in[i] << " → " << got[i] << ", expected " << want[i].out;
  }
  // The patterns themselves: what cuDNN and cuBLAS read.
  std::vector<uint16_t> bits;
  device_round_trip({1.0f, -2.0f, -0.0f}, Precision::BF16, &bits);
  EXPECT_EQ(bits, (std::vector<uint16_t>{0x3F80, 0xC000, 0x8000}));
  device_round_trip({1.0f, 65504.0f, 65520.0f, -65520.0f, -0.0f, std::ldexp(1.0f, -24)}, Precision::FP16, &bits);
  EXPECT_EQ(bits, (std::vector<uint16_t>{0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x8000, 0x0001}));
}

// Every one of the 65536 patterns (NaNs compared as NaN): widening is exact and narrowing gives the pattern back.
TEST(CudaCast, EveryPatternRoundTrips) {
  HT_REQUIRE_GPU();
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<uint16_t> patterns(65536);
    for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = uint16_t(i);
    cuda::DeviceBuffer<uint16_t> half(patterns.size()), again(patterns.size());
    cuda::DeviceBuffer<float> wide(patterns.size());
    half.upload(patterns);
    cuda::cast_from_16bit(wide.data(), half.data(), int64_t(patterns.size()), p, nullptr);
    cuda::cast_to_16bit(again.data(), wide.data(), int64_t(patterns.size()), p, nullptr);
    const std::vector<float> w = wide.download();
    const std::vector<uint16_t> b = again.download();
    int bad = 0;
    for (size_t i = 0; i < patterns.size(); ++i) {
      const float want = gpu_test::decode_16bit_twin(uint16_t(i), p);
      const bool ok = same(w[i], want) && (std::isnan(want) || b[i] == uint16_t(i));
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "pattern 0x" << std::hex << i << std::dec << ": widened " << w[i] << " (expected " << want
                      << "), narrowed back to 0x" << std::hex << b[i];
    }
    EXPECT_EQ(bad, 0);
  }
}

// Random values over the whole range the layers see (2^-30 .. 2^20, both signs), plus exact ties (a 16-bit
// value plus half its ulp) — more than the grid covers in one pass (grid-stride loop) and not a multiple of
// the block.
TEST(CudaCast, MatchesTwinOnRandomValues) {
  HT_REQUIRE_GPU();
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(p));
    const size_t n = 3000017;
    std::mt19937 rng(41);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> e(-30, 20);
    std::vector<float> x(n);
    const int digits = p == Precision::BF16 ? 8 : 11;
    for (size_t i = 0; i < n; ++i) {
      const float v = std::ldexp(u(rng), e(rng));
      if (i % 4 == 0) {  // a tie: a representable value plus half of its ulp
        const float r = gpu_test::round_to_16bit_twin(v, p);
        int ex = 0;
        std::frexp(r, &ex);
        x[i] = std::isfinite(r) && r != 0 ? r + std::copysign(std::ldexp(1.0f, ex - 1 - digits), r) : v;
      } else {
        x[i] = v;
      }
    }
    const std::vector<float> got = device_round_trip(x, p);
    int bad = 0;
    double max_abs = 0, max_rel = 0;
    for (size_t i = 0; i < n; ++i) {
      const float want = gpu_test::round_to_16bit_twin(x[i], p);
      if (!same(got[i], want) && bad++ < 5)
        ADD_FAILURE() << "x[" << i << "] = " << x[i] << " → " << got[i] << ", twin " << want;
      const double d = std::abs(double(got[i]) - double(want));
      if (std::isfinite(d) && d > 0) {
        max_abs = std::max(max_abs, d);
        if (want != 0) max_rel = std::max(max_rel, d / std::abs(double(want)));
      }
    }
    EXPECT_EQ(bad, 0) << "of " << n;
    gpu_test::record_parity(std::string("round to ") + precision_name(p) + " (bit for bit)", n, max_abs, max_rel,
                            bad == 0 ? 0.0 : INFINITY, bad == 0);
  }
}

// acc += widen(half): a plain float add on both sides, so exact; n = 0 does nothing.
TEST(CudaCast, AccumulateAddsIntoFloat) {
  HT_REQUIRE_GPU();
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precision_name(p));
    const size_t n = 100003;
    const std::vector<float> x = gpu_test::random_floats(n, 51, -3.0f, 3.0f);
    std::vector<float> acc = gpu_test::random_floats(n, 52, -100.0f, 100.0f);
    cuda::DeviceBuffer<float> d_x(n), d_acc(n);
    cuda::DeviceBuffer<uint16_t> half(n);
    d_x.upload(x);
    d_acc.upload(acc);
    cuda::cast_to_16bit(half.data(), d_x.data(), int64_t(n), p, nullptr);
    cuda::accumulate_16bit(d_acc.data(), half.data(), int64_t(n), p, nullptr);
    cuda::accumulate_16bit(d_acc.data(), half.data(), 0, p, nullptr);
    for (size_t i = 0; i < n; ++i) acc[i] += gpu_test::round_to_16bit_twin(x[i], p);
    gpu_test::expect_close("acc", d_acc.download(), acc, 0, 0);
  }
}

TEST(CudaCast, RejectsPrecisionsWithout16Bits) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> f(4);
  cuda::DeviceBuffer<uint16_t> h(4);
  EXPECT_THROW(cuda::cast_to_16bit(h.data(), f.data(), 4, Precision::FP32, nullptr), Error);
  EXPECT_THROW(cuda::cast_from_16bit(f.data(), h.data(), 4, Precision::TF32, nullptr), Error);
  EXPECT_THROW(cuda::accumulate_16bit(f.data(), nullptr, 4, Precision::BF16, nullptr), Error);
}

// Runs in the CPU-only build: the casts fail loudly, and no 16-bit scratch exists to count.
TEST(CudaCast, CpuBuildStubs) {
  if (cuda_built()) GTEST_SKIP() << "CUDA build: the stubs are not linked";
  EXPECT_EQ(cuda::low_precision_scratch_bytes(), 0u);
  EXPECT_THROW(cuda::cast_to_16bit(nullptr, nullptr, 1, Precision::BF16, nullptr), Error);
  EXPECT_THROW(cuda::cast_from_16bit(nullptr, nullptr, 1, Precision::FP16, nullptr), Error);
  EXPECT_THROW(cuda::accumulate_16bit(nullptr, nullptr, 1, Precision::BF16, nullptr), Error);
}
