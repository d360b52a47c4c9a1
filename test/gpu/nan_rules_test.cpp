// test/gpu/nan_rules_test.cpp — every op's CUDA slot propagates NaN and Inf as PyTorch does: the rules of
// test/support/nan_rules.hpp (test/ops/nan_rules_test.cpp runs them on the CPU), walked over the op registry.
// On the host emulation (test_gpu_on_host) cuDNN and cuBLAS are the emulation's; on a GPU, the vendor's.
#include <gtest/gtest.h>

#include "../support/nan_rules.hpp"
#include "gpu_test_util.hpp"

using namespace hetrain;

TEST(CudaNanRules, EveryCudaOpPropagatesNanAsPyTorch) {
  HT_REQUIRE_GPU();
  const int ran = nan_rules::check_registered_ops(Device::CUDA);
  EXPECT_EQ(ran, int(nan_rules::rules().size())) << "every op has a CUDA slot, so every rule runs on CUDA";
}
