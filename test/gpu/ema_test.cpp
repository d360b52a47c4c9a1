// test/gpu/ema_test.cpp — the moving average's kernel against the CPU op, bit for bit (a CPU rank and a
// GPU rank of one job keep identical averages).
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "ops/ema/ema.hpp"

using namespace hetrain;
using gpu_test::expect_close;

TEST(CudaEma, MatchesTheCpuOpBitForBit) {
  HT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(100003)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto avg = gpu_test::random_floats(n, 3), x = gpu_test::random_floats(n, 4);
    Tensor cpu_avg({n}), cpu_x({n});
    std::copy(avg.begin(), avg.end(), cpu_avg.data());
    std::copy(x.begin(), x.end(), cpu_x.data());
    Tensor gpu_avg = cpu_avg.to(Device::CUDA), gpu_x = cpu_x.to(Device::CUDA);
    for (float decay : {0.0f, 0.3f, 0.9999f}) {
      ops::ema_update(cpu_avg, cpu_x, decay);
      ops::ema_update(gpu_avg, gpu_x, decay);
    }
    const Tensor back = gpu_avg.to(Device::CPU);
    expect_close("average", std::vector<float>(back.data(), back.data() + n),
                 std::vector<float>(cpu_avg.data(), cpu_avg.data() + n), 0, 0);
  }
}
