// test/gpu/elementwise_test.cpp — residual add and accumulate against ops::cpu:: (exact: one float add each),
// and the NaN/Inf count against its twin (exact).
#include <gtest/gtest.h>

#include <limits>

#include "gpu_test_util.hpp"
#include "twins.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
// x [n] with NaN, +Inf and -Inf planted at fixed places; returns how many were planted.
int64_t plant_nonfinite(std::vector<float>& x) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int64_t planted = 0;
  for (size_t i = 3; i < x.size(); i += 997, ++planted) x[i] = (planted % 3 == 0) ? nan : (planted % 3 == 1 ? inf : -inf);
  return planted;
}
}  // namespace

// Runs everywhere: the twin itself.
TEST(NonfiniteTwin, CountsNaNAndInfOnly) {
  std::vector<float> x = {0.0f, -0.0f, 1e38f, -1e38f, std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max()};
  EXPECT_EQ(gpu_test::count_nonfinite_twin(x.data(), int64_t(x.size())), 3);
  std::vector<float> big(10000, 1.0f);
  EXPECT_EQ(gpu_test::count_nonfinite_twin(big.data(), int64_t(big.size())), 0);
  const int64_t planted = plant_nonfinite(big);
  EXPECT_EQ(planted, 11);
  EXPECT_EQ(gpu_test::count_nonfinite_twin(big.data(), int64_t(big.size())), planted);
}

TEST(CudaElementwise, AddAndAccumulateParity) {
  HT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), int64_t(100003), int64_t(3000001)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto a = gpu_test::random_floats(n, 1), b = gpu_test::random_floats(n, 2);
    std::vector<float> sum_ref(n), acc_ref = a;
    ops::cpu::add_forward(sum_ref.data(), a.data(), b.data(), n);
    ops::cpu::accumulate(acc_ref.data(), b.data(), n);
    cuda::DeviceBuffer<float> da(n), db(n), dout(n);
    da.upload(a);
    db.upload(b);
    cuda::add_forward(dout.data(), da.data(), db.data(), n, nullptr);
    expect_close("add", dout.download(), sum_ref, 0, 0);
    cuda::accumulate(da.data(), db.data(), n, nullptr);
    expect_close("accumulate", da.download(), acc_ref, 0, 0);
    cuda::add_forward(db.data(), db.data(), db.data(), n, nullptr);  // aliasing allowed
    std::vector<float> twice(n);
    ops::cpu::add_forward(twice.data(), b.data(), b.data(), n);
    expect_close("add in place", db.download(), twice, 0, 0);
  }
}

// Twin: x[i] *= a in a plain loop (exact: one float multiply each).
TEST(CudaElementwise, ScaleParity) {
  HT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(3000001)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = gpu_test::random_floats(n, 3);
    const float a = 17.0f / 64.0f;
    std::vector<float> ref = x;
    for (auto& v : ref) v *= a;
    cuda::DeviceBuffer<float> dx(n);
    dx.upload(x);
    cuda::scale(dx.data(), a, n, nullptr);
    expect_close("scale", dx.download(), ref, 0, 0);
  }
}

TEST(CudaElementwise, NonfiniteCountParity) {
  HT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(100003), int64_t(5000011)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = gpu_test::random_floats(n, 3);
    const int64_t clean = gpu_test::count_nonfinite_twin(x.data(), n);
    ASSERT_EQ(clean, 0);
    cuda::DeviceBuffer<float> dx(n);
    cuda::DeviceBuffer<int64_t> count(1);
    dx.upload(x);
    cuda::memset_zero(count.data(), sizeof(int64_t));
    cuda::count_nonfinite(count.data(), dx.data(), n, nullptr);
    EXPECT_EQ(count.download()[0], 0);
    plant_nonfinite(x);
    dx.upload(x);
    cuda::memset_zero(count.data(), sizeof(int64_t));
    cuda::count_nonfinite(count.data(), dx.data(), n, nullptr);
    EXPECT_EQ(count.download()[0], gpu_test::count_nonfinite_twin(x.data(), n));
  }
}
