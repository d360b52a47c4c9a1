// test/gpu/softmax_xent_test.cpp — cuda::softmax_xent_* and top1_correct against ops::cpu:: (hetrain/ops.hpp).
// Tolerances: probs atol 1e-6 + rtol 1e-5 (float expf vs the twin's double exp); mean loss atol 1e-5 +
// rtol 1e-5; dlogits atol 1e-6 + rtol 1e-5; top-1 counts exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu_test_util.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
struct XentCase {
  int N, K;
  float eps;
};

void check_xent(const XentCase& c, uint32_t seed) {
  SCOPED_TRACE("N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " eps=" + std::to_string(c.eps));
  const size_t nk = size_t(c.N) * c.K;
  std::vector<float> logits = gpu_test::random_floats(nk, seed, -8.0f, 8.0f);
  std::vector<int32_t> labels = gpu_test::random_labels(c.N, c.K, seed + 1);
  std::vector<float> probs_ref(nk), dlogits_ref(nk);
  const float loss_ref = ops::cpu::softmax_xent_forward(probs_ref.data(), logits.data(), labels.data(), c.N, c.K, c.eps);
  const float scale = 1.0f / c.N;
  ops::cpu::softmax_xent_backward(dlogits_ref.data(), probs_ref.data(), labels.data(), c.N, c.K, c.eps, scale);

  cuda::DeviceBuffer<float> d_logits(nk), d_probs(nk), d_dlogits(nk), d_loss(c.N);
  cuda::DeviceBuffer<int32_t> d_labels(c.N);
  d_logits.upload(logits);
  d_labels.upload(labels);
  cuda::softmax_xent_forward(d_probs.data(), d_loss.data(), d_logits.data(), d_labels.data(), c.N, c.K, c.eps,
                             nullptr);
  cuda::softmax_xent_backward(d_dlogits.data(), d_probs.data(), d_labels.data(), c.N, c.K, c.eps, scale, nullptr);
  cuda::device_synchronize();
  expect_close("probs", d_probs.download(), probs_ref, 1e-6, 1e-5);
  double loss = 0;
  for (float l : d_loss.download()) loss += l;
  loss /= c.N;
  EXPECT_NEAR(loss, loss_ref, 1e-5 + 1e-5 * std::abs(loss_ref));
  {
    const double d = std::abs(loss - loss_ref), tol = 1e-5 + 1e-5 * std::abs(loss_ref);
    gpu_test::record_parity("mean loss", 1, d, loss_ref != 0 ? d / std::abs(loss_ref) : 0, d / tol, d <= tol);
  }
  expect_close("dlogits", d_dlogits.download(), dlogits_ref, 1e-6, 1e-5);

  // In place: dlogits may alias probs.
  cuda::softmax_xent_backward(d_probs.data(), d_probs.data(), d_labels.data(), c.N, c.K, c.eps, scale, nullptr);
  expect_close("dlogits in place", d_probs.download(), dlogits_ref, 1e-6, 1e-5);
}
}  // namespace

TEST(CudaSoftmaxXent, ParityOddShapes) {
  HT_REQUIRE_GPU();
  const XentCase cases[] = {{1, 1, 0.0f},  {7, 13, 0.0f},   {5, 13, 0.1f},  {3, 1000, 0.1f},
                            {9, 257, 0.2f}, {64, 10, 0.0f}, {33, 4097, 0.1f}, {2, 31, 1.0f}};
  uint32_t seed = 100;
  for (const auto& c : cases) check_xent(c, seed++);
}

TEST(CudaSoftmaxXent, LargeLogitsStayFinite) {
  HT_REQUIRE_GPU();
  const int N = 2, K = 5;
  std::vector<float> logits = {1000, -1000, 999, 0, 1, -3e4f, 3e4f, 0, 0, 0};
  std::vector<int32_t> labels = {0, 1};
  std::vector<float> probs_ref(N * K);
  const float loss_ref = ops::cpu::softmax_xent_forward(probs_ref.data(), logits.data(), labels.data(), N, K, 0.1f);
  cuda::DeviceBuffer<float> d_logits(N * K), d_probs(N * K), d_loss(N);
  cuda::DeviceBuffer<int32_t> d_labels(N);
  d_logits.upload(logits);
  d_labels.upload(labels);
  cuda::softmax_xent_forward(d_probs.data(), d_loss.data(), d_logits.data(), d_labels.data(), N, K, 0.1f, nullptr);
  expect_close("probs", d_probs.download(), probs_ref, 1e-6, 1e-5);
  auto loss = d_loss.download();
  EXPECT_NEAR((loss[0] + loss[1]) / 2, loss_ref, 1e-3 * std::abs(loss_ref));
}

TEST(CudaSoftmaxXent, BadLabelGivesNaN) {
  HT_REQUIRE_GPU();
  const int N = 3, K = 4;
  cuda::DeviceBuffer<float> d_logits(N * K), d_probs(N * K), d_loss(N);
  cuda::DeviceBuffer<int32_t> d_labels(N);
  d_logits.upload(gpu_test::random_floats(N * K, 7));
  d_labels.upload({0, 4, -1});
  cuda::softmax_xent_forward(d_probs.data(), d_loss.data(), d_logits.data(), d_labels.data(), N, K, 0.0f, nullptr);
  auto loss = d_loss.download();
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isnan(loss[2]));
  EXPECT_THROW(cuda::softmax_xent_forward(d_probs.data(), d_loss.data(), d_logits.data(), d_labels.data(), N, 0, 0.0f,
                                          nullptr),
               Error);
}

TEST(CudaTop1, ParityWithTiesAcrossThreads) {
  HT_REQUIRE_GPU();
  for (int K : {1, 3, 10, 300, 1000}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    const int N = 37;
    std::vector<float> logits = gpu_test::random_floats(size_t(N) * K, 11 + K);
    std::vector<int32_t> labels = gpu_test::random_labels(N, K, 12 + K);
    // Ties: rows whose maximum appears twice, 256 apart when K allows it (different threads of the block);
    // the first index wins, so label = the later index must count as wrong.
    for (int n = 0; n < N; n += 3) {
      const int a = n % K, b = K > 256 ? (a + 256) % K : (a + 1) % K;
      logits[size_t(n) * K + a] = logits[size_t(n) * K + b] = 5.0f;
      labels[n] = (n % 2) ? std::min(a, b) : std::max(a, b);
    }
    for (int n = 1; n < N; n += 4) labels[n] = int32_t(std::max_element(&logits[size_t(n) * K], &logits[size_t(n + 1) * K]) - &logits[size_t(n) * K]);
    const int64_t ref = ops::cpu::top1_correct(logits.data(), labels.data(), N, K);
    cuda::DeviceBuffer<float> d_logits(logits.size());
    cuda::DeviceBuffer<int32_t> d_labels(N);
    cuda::DeviceBuffer<int64_t> d_count(1);
    d_logits.upload(logits);
    d_labels.upload(labels);
    d_count.upload({3});  // counts accumulate
    cuda::top1_correct(d_count.data(), d_logits.data(), d_labels.data(), N, K, nullptr);
    EXPECT_EQ(d_count.download()[0], ref + 3);
  }
}
