// ops::Conv2dOp: the count of kernels made, which the trainers use to leave set-up steps (oneDNN's JIT,
// cuDNN's algorithm search for a new batch size) out of the balancer's timings.
#include <gtest/gtest.h>

#include "ops/conv2d/conv2d.hpp"
#include "tensor_op_test_util.hpp"

using namespace hetrain;
using namespace ops_test;

TEST(Conv2dOp, CountsKernelsMadeForNewShapesOnly) {
  ops::Conv2dOp conv(4, 3, 1, 1);
  ops::HostScratch scratch;
  ops::Conv2dOptions options;
  options.scratch = &scratch;
  const Tensor w = filled({4, 2, 3, 3}, 0.1f), b = filled({4}, 0.0f);
  auto forward = [&](int64_t n) {
    const Tensor x = filled({n, 2, 5, 5}, 1.0f);
    Tensor y({n, 4, 5, 5});
    conv.forward(y, x, w, b, options);
  };
  const int64_t start = ops::conv2d_kernels_made();
  forward(3);
  EXPECT_EQ(ops::conv2d_kernels_made(), start + 1) << "the first call makes the kernel";
  forward(3);
  forward(3);
  EXPECT_EQ(ops::conv2d_kernels_made(), start + 1) << "the same shape reuses it";
  forward(5);
  EXPECT_EQ(ops::conv2d_kernels_made(), start + 2) << "a new batch size (a rebalance) makes a new one";
}
