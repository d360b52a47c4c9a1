// ops/concat: channel concatenation and copy_channels — values by hand, skipped input gradients, a round
// trip on sizes that take the OpenMP path (bit-identical for any thread count), finite-difference gradients
// in double, N = 0, and the errors of bad shapes.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "tensor_op_test_util.hpp"
#include "ops/concat/concat.hpp"

using namespace hetrain;
using namespace hetrain::ops;
using namespace ops_test;

namespace {
Tensor nan_tensor(const Shape& shape) { return filled(shape, std::numeric_limits<float>::quiet_NaN()); }
}  // namespace

// x0 [2, 1, 1, 2] and x1 [2, 2, 1, 2] → y [2, 3, 1, 2]: per sample, x0's channel then x1's two.
TEST(ConcatChannels, ForwardByHand) {
  Tensor x0 = tensor_of({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor x1 = tensor_of({2, 2, 1, 2}, {10, 11, 12, 13, 14, 15, 16, 17});
  Tensor y = nan_tensor({2, 3, 1, 2});
  concat_channels_forward(y, {x0, x1});
  EXPECT_EQ(values(y), (std::vector<float>{1, 2, 10, 11, 12, 13,  //
                                           3, 4, 14, 15, 16, 17}));
}

// The same split backwards; the middle input's gradient is not needed (undefined), so the channel counts
// are given; the others are overwritten.
TEST(ConcatChannels, BackwardByHandSkipsUndefined) {
  Tensor dy = tensor_of({2, 4, 1, 1}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor d0 = nan_tensor({2, 1, 1, 1}), d2 = nan_tensor({2, 2, 1, 1});
  concat_channels_backward({d0, Tensor(), d2}, dy, {1, 1, 2});
  EXPECT_EQ(values(d0), (std::vector<float>{1, 5}));
  EXPECT_EQ(values(d2), (std::vector<float>{3, 4, 7, 8}));
  // All defined: the channel counts come from the tensors.
  Tensor d1 = nan_tensor({2, 1, 1, 1});
  concat_channels_backward({d0, d1, d2}, dy);
  EXPECT_EQ(values(d1), (std::vector<float>{2, 6}));
  EXPECT_EQ(values(d2), (std::vector<float>{3, 4, 7, 8}));
}

// dst [1, 4, 1, 2] ← channels 1..2 of src [1, 3, 1, 2] at channel 2; dst's channels 0..1 keep their values.
TEST(CopyChannels, ByHandLeavesOtherChannels) {
  Tensor src = tensor_of({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Tensor dst = tensor_of({1, 4, 1, 2}, {-1, -2, -3, -4, -5, -6, -7, -8});
  copy_channels(dst, 2, src, 1, 2);
  EXPECT_EQ(values(dst), (std::vector<float>{-1, -2, -3, -4, 3, 4, 5, 6}));
  copy_channels(dst, 0, src, 0, 0);  // nothing to copy
  EXPECT_EQ(values(dst), (std::vector<float>{-1, -2, -3, -4, 3, 4, 5, 6}));
}

// Forward then backward gives the inputs back. Two shapes: several samples, and one sample of 3·64·80·80
// elements (the OpenMP path cuts inside a sample); 1 and 3 threads give the same bits.
TEST(ConcatChannels, RoundTripAnyThreadCount) {
  for (int64_t N : {int64_t(3), int64_t(1)}) {
    const int64_t H = N == 1 ? 80 : 5, W = N == 1 ? 80 : 3;
    const std::vector<int64_t> C = {64, 1, 128};
    std::vector<Tensor> xs;
    for (size_t i = 0; i < C.size(); ++i)
      xs.push_back(tensor_of({N, C[i], H, W}, random_vec<float>(size_t(N * C[i] * H * W), uint32_t(20 + i))));
    for (int threads : {1, 3}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " threads=" + std::to_string(threads));
      Tensor y = nan_tensor({N, 193, H, W});
      std::vector<Tensor> dxs;
      for (const Tensor& x : xs) dxs.push_back(nan_tensor(x.shape()));
      with_threads(threads, [&] {
        concat_channels_forward(y, xs);
        concat_channels_backward(dxs, y);
      });
      for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(values(dxs[i]), values(xs[i])) << "input " << i;
      // y against the definition: sample n's channel block of input i sits at Σ_{j<i} C_j.
      int64_t bad = 0, offset = 0;
      for (size_t i = 0; i < xs.size(); offset += C[i], ++i)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < C[i] * H * W; ++k)
            bad += y[(n * 193 + offset) * H * W + k] != xs[i][n * C[i] * H * W + k];
      EXPECT_EQ(bad, 0);
    }
  }
}

// L = Σ y ⊙ G in double, y = concat(x0, x1, x2): each dL/dx_i by the backward vs central differences.
TEST(ConcatChannelsGrad, FiniteDifferences) {
  const int64_t N = 2, plane = 2 * 3;
  const std::vector<int64_t> C = {2, 1, 3};
  std::vector<std::vector<double>> xs;
  for (size_t i = 0; i < C.size(); ++i) xs.push_back(random_vec<double>(size_t(N * C[i] * plane), uint32_t(30 + i)));
  const auto G = random_vec<double>(size_t(N * 6 * plane), 33);
  std::vector<double> y(G.size());
  std::vector<std::vector<double>> dxs;
  for (const auto& x : xs) dxs.emplace_back(x.size());
  auto loss = [&] {
    concat_channels_forward_cpu<double>(y.data(), {xs[0].data(), xs[1].data(), xs[2].data()}, C, N, plane);
    return dot(y, G);
  };
  concat_channels_backward_cpu<double>({dxs[0].data(), dxs[1].data(), dxs[2].data()}, G.data(), C, N, plane);
  for (size_t i = 0; i < xs.size(); ++i) {
    expect_gradient("dx" + std::to_string(i), xs[i], dxs[i], loss);
    expect_sharp(xs[i], dxs[i], loss);
  }
}

TEST(ConcatChannels, EmptyBatch) {
  Tensor a({0, 2, 3, 3}), b({0, 1, 3, 3}), y({0, 3, 3, 3});
  EXPECT_NO_THROW(concat_channels_forward(y, {a, b}));
  EXPECT_NO_THROW(concat_channels_backward({a, Tensor()}, y, {2, 1}));
  EXPECT_NO_THROW(copy_channels(y, 1, a, 0, 2));
}

TEST(ConcatChannels, BadShapesNameTheOp) {
  Tensor a({2, 2, 4, 4}), b({2, 1, 4, 4});
  expect_error("concat_channels_forward", "no inputs", [&] { concat_channels_forward(Tensor({2, 3, 4, 4}), {}); });
  expect_error("concat_channels_forward", "3 channels in all, the output 4",
               [&] { concat_channels_forward(Tensor({2, 4, 4, 4}), {a, b}); });
  expect_error("concat_channels_forward", "input 1 is [2, 1, 4, 5], expected [2, 1, 4, 4]",
               [&] { concat_channels_forward(Tensor({2, 3, 4, 4}), {a, Tensor({2, 1, 4, 5})}); });
  expect_error("concat_channels_forward", "input 1 must be 4-D",
               [&] { concat_channels_forward(Tensor({2, 3, 4, 4}), {a, Tensor()}); });
  expect_error("concat_channels_backward", "input gradient 1 is undefined",
               [&] { concat_channels_backward({a, Tensor()}, Tensor({2, 3, 4, 4})); });
  expect_error("concat_channels_backward", "2 channel counts for 3 input gradients",
               [&] { concat_channels_backward({a, b, b}, Tensor({2, 4, 4, 4}), {2, 1}); });
  expect_error("concat_channels_backward", "input gradient 0 is [2, 2, 4, 4], expected [2, 3, 4, 4]",
               [&] { concat_channels_backward({a, b}, Tensor({2, 4, 4, 4}), {3, 1}); });
  expect_error("concat_channels_backward", "3 channels in all, the output gradient 5",
               [&] { concat_channels_backward({a, b}, Tensor({2, 5, 4, 4})); });
  expect_error("copy_channels", "channels [1, 3) do not fit the source's 2",
               [&] { copy_channels(Tensor({2, 5, 4, 4}), 0, a, 1, 2); });
  expect_error("copy_channels", "channels [4, 6) do not fit the destination's 5",
               [&] { copy_channels(Tensor({2, 5, 4, 4}), 4, a, 0, 2); });
  expect_error("copy_channels", "negative channel range", [&] { copy_channels(Tensor({2, 5, 4, 4}), 0, a, 0, -1); });
  expect_error("copy_channels", "source is [2, 2, 4, 4], expected [3, 2, 4, 4]",
               [&] { copy_channels(Tensor({3, 5, 4, 4}), 0, a, 0, 1); });
}

TEST(ConcatChannels, RegisteredForEveryBuiltDevice) {
  EXPECT_TRUE(copy_channels_impl.has(Device::CPU));
  EXPECT_EQ(copy_channels_impl.has(Device::CUDA), cuda_built());
}
