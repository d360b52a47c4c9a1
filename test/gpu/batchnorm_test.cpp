// test/gpu/batchnorm_test.cpp — cuda::batchnorm_* (cuDNN) against ops::cpu::batchnorm_* (double statistics).
// Tolerances (atol + rtol·|ref|): out, din 1e-4 + 1e-3; saved mean, invstd, running stats 1e-5 + 1e-4;
// dgamma, dbeta (sums over N·HW terms in another order) 1e-3 + 1e-4.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpu_test_util.hpp"
#include "ops/batchnorm/batchnorm.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
struct Case {
  int N, C, HW;
  bool affine = true;       // gamma/beta given (else null: 1/0)
  bool running = true;      // running stats given
  bool want_din = true, want_dgamma = true, want_dbeta = true;
  bool only_running_var = false;  // running_mean null, running_var given
  float eps = 1e-5f;              // forward and backward take the same one
};

std::string describe(const Case& k) {
  return "N" + std::to_string(k.N) + " C" + std::to_string(k.C) + " HW" + std::to_string(k.HW) +
         (k.affine ? "" : " no-affine") + (k.running ? "" : " no-running") + (k.want_din ? "" : " no-din") +
         (k.want_dgamma ? "" : " no-dgamma") + (k.want_dbeta ? "" : " no-dbeta") +
         (k.only_running_var ? " running-var-only" : "") + " eps" + std::to_string(k.eps);
}

void check_batchnorm(const Case& k, uint32_t seed) {
  SCOPED_TRACE(describe(k));
  const int N = k.N, C = k.C, HW = k.HW;
  const size_t n = size_t(N) * C * HW;
  const float momentum = 0.1f, eps = k.eps;
  // Channel c's values are offset by c/2: the statistics differ per channel and are not centred at 0.
  auto in = gpu_test::random_floats(n, seed);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < HW; ++j) in[(size_t(i) * C + c) * HW + j] += 0.5f * c;
  auto gamma = gpu_test::random_floats(C, seed + 1, 0.5f, 1.5f), beta = gpu_test::random_floats(C, seed + 2);
  auto rmean0 = gpu_test::random_floats(C, seed + 3), rvar0 = gpu_test::random_floats(C, seed + 4, 0.5f, 1.5f);
  auto dout = gpu_test::random_floats(n, seed + 5);
  const float* g_ref = k.affine ? gamma.data() : nullptr;
  const float* b_ref = k.affine ? beta.data() : nullptr;

  // CPU reference. Parameter gradients start non-zero (they must accumulate); din must be overwritten.
  std::vector<float> out_ref(n), mean_ref(C), invstd_ref(C), rmean_ref = rmean0, rvar_ref = rvar0;
  std::vector<float> din_ref(n, 7.0f), dg_ref(C, 0.5f), db_ref(C, -0.25f);
  const bool rm = k.running && !k.only_running_var, rv = k.running || k.only_running_var;
  ops::cpu::batchnorm_forward_train(out_ref.data(), mean_ref.data(), invstd_ref.data(), rm ? rmean_ref.data() : nullptr,
                               rv ? rvar_ref.data() : nullptr, in.data(), g_ref, b_ref, N, C, HW, momentum, eps);
  ops::cpu::batchnorm_backward(k.want_din ? din_ref.data() : nullptr, k.want_dgamma ? dg_ref.data() : nullptr,
                          k.want_dbeta ? db_ref.data() : nullptr, dout.data(), in.data(), g_ref, mean_ref.data(),
                          invstd_ref.data(), N, C, HW);
  std::vector<float> eval_ref(n);
  ops::cpu::batchnorm_forward_eval(eval_ref.data(), in.data(), g_ref, b_ref, rmean0.data(), rvar0.data(), N, C, HW, eps);

  cuda::DeviceBuffer<float> d_in(n), d_out(n), d_eval(n), d_dout(n), d_din(n), d_g(C), d_b(C), d_rm(C), d_rv(C),
      d_mean(C), d_invstd(C), d_dg(C), d_db(C);
  d_in.upload(in), d_dout.upload(dout), d_g.upload(gamma), d_b.upload(beta), d_rm.upload(rmean0), d_rv.upload(rvar0);
  d_din.upload(std::vector<float>(n, 7.0f)), d_dg.upload(std::vector<float>(C, 0.5f));
  d_db.upload(std::vector<float>(C, -0.25f));
  CudaStream s = cuda::stream_create();
  // Eval first, from the initial running stats (the training call below updates them).
  cuda::batchnorm_forward_eval(d_eval.data(), d_in.data(), k.affine ? d_g.data() : nullptr,
                               k.affine ? d_b.data() : nullptr, d_rm.data(), d_rv.data(), N, C, HW, eps, s);
  cuda::batchnorm_forward_train(d_out.data(), d_mean.data(), d_invstd.data(), rm ? d_rm.data() : nullptr,
                                rv ? d_rv.data() : nullptr, d_in.data(), k.affine ? d_g.data() : nullptr,
                                k.affine ? d_b.data() : nullptr, N, C, HW, momentum, eps, s);
  cuda::batchnorm_backward(k.want_din ? d_din.data() : nullptr, k.want_dgamma ? d_dg.data() : nullptr,
                           k.want_dbeta ? d_db.data() : nullptr, d_dout.data(), d_in.data(),
                           k.affine ? d_g.data() : nullptr, d_mean.data(), d_invstd.data(), N, C, HW, eps, s);
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);

  expect_close("eval out", d_eval.download(), eval_ref, 1e-4, 1e-3);
  expect_close("train out", d_out.download(), out_ref, 1e-4, 1e-3);
  expect_close("save_mean", d_mean.download(), mean_ref, 1e-5, 1e-4);
  expect_close("save_invstd", d_invstd.download(), invstd_ref, 1e-5, 1e-4);
  expect_close("running_mean", d_rm.download(), rm ? rmean_ref : rmean0, 1e-5, 1e-4);  // untouched when null
  expect_close("running_var", d_rv.download(), rv ? rvar_ref : rvar0, 1e-5, 1e-4);
  expect_close("din", d_din.download(), din_ref, 1e-4, 1e-3);
  expect_close("dgamma", d_dg.download(), dg_ref, 1e-3, 1e-4);
  expect_close("dbeta", d_db.download(), db_ref, 1e-3, 1e-4);
}
}  // namespace

TEST(CudaBatchNorm, ParityOddShapes) {
  HT_REQUIRE_GPU();
  check_batchnorm({3, 5, 7 * 9}, 11);
  check_batchnorm({7, 11, 1}, 12);        // BatchNorm1d after a dense layer
  check_batchnorm({2, 3, 1}, 13);         // two values per channel: the smallest training batch
  check_batchnorm({4, 16, 14 * 14}, 14);  // ResNet-like plane
  check_batchnorm({1, 64, 3 * 5}, 15);    // one sample
}

// A layer's own epsilon reaches backward too (it was once fixed at 1e-5 there). A large one, on a channel
// whose variance is small next to it, changes every gradient noticeably.
TEST(CudaBatchNorm, ParityWithTheLayersEpsilon) {
  HT_REQUIRE_GPU();
  Case k{4, 3, 10};
  k.eps = 0.5f;
  check_batchnorm(k, 16);
  k.eps = 1e-3f;
  check_batchnorm(k, 17);
}

TEST(CudaBatchNorm, NullPointersFollowTheCpuContract) {
  HT_REQUIRE_GPU();
  Case k{3, 6, 25};
  k.affine = false;
  check_batchnorm(k, 21);
  k = Case{3, 6, 25};
  k.running = false;
  check_batchnorm(k, 22);
  k = Case{3, 6, 25};
  k.running = false, k.only_running_var = true;
  check_batchnorm(k, 23);
  k = Case{3, 6, 25};
  k.want_din = false;
  check_batchnorm(k, 24);
  k = Case{3, 6, 25};
  k.want_dgamma = false, k.want_dbeta = false;
  check_batchnorm(k, 25);
}

TEST(CudaBatchNorm, EmptyBatchAndBadSizes) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> buf(8), rm(2);
  rm.upload({0.25f, -0.5f});
  // N = 0: nothing happens (running stats untouched).
  cuda::batchnorm_forward_train(buf.data(), buf.data(), buf.data(), rm.data(), rm.data(), buf.data(), nullptr, nullptr,
                                0, 2, 4, 0.1f, 1e-5f, nullptr);
  cuda::device_synchronize();
  expect_close("running_mean", rm.download(), std::vector<float>{0.25f, -0.5f}, 0, 0);
  // One value per channel cannot be normalised in training (as ops::cpu:: and PyTorch).
  EXPECT_THROW(cuda::batchnorm_forward_train(buf.data(), buf.data(), buf.data(), nullptr, nullptr, buf.data(), nullptr,
                                             nullptr, 1, 2, 1, 0.1f, 1e-5f, nullptr),
               Error);
  EXPECT_THROW(cuda::batchnorm_backward(buf.data(), nullptr, nullptr, buf.data(), buf.data(), nullptr, buf.data(),
                                        buf.data(), 1, 0, 4, 1e-5f, nullptr),
               Error);
  EXPECT_THROW(cuda::batchnorm_backward(buf.data(), nullptr, nullptr, buf.data(), buf.data(), nullptr, buf.data(),
                                        buf.data(), 1, 2, 4, 0.0f, nullptr),
               Error);  // the forward's eps must be positive, so must backward's
}

// Synchronised batch norm's parts (kernels/batchnorm.cu, --bn sync) against their CPU twins: the per-channel
// sums in double (another summation order: 1e-9 relative), dx 1e-5 + 1e-4·|ref|.
TEST(CudaBatchNorm, SyncPartsMatchTheCpuTwins) {
  HT_REQUIRE_GPU();
  struct Shape3 {
    int N, C, HW;
  };
  uint32_t seed = 40;
  for (const Shape3 k : {Shape3{5, 3, 49}, Shape3{1, 7, 1000}, Shape3{64, 16, 3}}) {
    SCOPED_TRACE("N" + std::to_string(k.N) + " C" + std::to_string(k.C) + " HW" + std::to_string(k.HW));
    auto host = [&](int64_t n, float lo, float hi) {
      Tensor t({n});
      const std::vector<float> v = gpu_test::random_floats(size_t(n), seed++, lo, hi);
      std::copy(v.begin(), v.end(), t.data());
      return t;
    };
    const int64_t n = int64_t(k.N) * k.C * k.HW;
    const Tensor x = host(n, 19.0f, 23.0f).reshape({k.N, k.C, 1, k.HW}), dy = host(n, -1, 1).reshape(x.shape());
    const Tensor shift = host(k.C, 20, 22), mean = host(k.C, 20, 22), invstd = host(k.C, 0.5f, 2);
    const Tensor gamma = host(k.C, 0.5f, 1.5f), mean_dy = host(k.C, -0.1f, 0.1f), mean_dy_xhat = host(k.C, -0.1f, 0.1f);
    auto gpu = [](const Tensor& t) { return t.to(Device::CUDA); };
    std::vector<double> ref(size_t(2) * k.C), got(size_t(2) * k.C);
    ops::batchnorm_stat_sums(ref.data(), x, shift);
    ops::batchnorm_stat_sums(got.data(), gpu(x), gpu(shift));
    expect_close("stat sums", got, ref, 1e-7, 1e-9);
    ops::batchnorm_grad_sums(ref.data(), dy, x, mean, invstd);
    ops::batchnorm_grad_sums(got.data(), gpu(dy), gpu(x), gpu(mean), gpu(invstd));
    expect_close("grad sums", got, ref, 1e-7, 1e-9);
    Tensor dx_ref(x.shape()), dx(x.shape(), Device::CUDA);
    ops::batchnorm_backward_given(dx_ref, dy, x, gamma, mean, invstd, mean_dy, mean_dy_xhat);
    ops::batchnorm_backward_given(dx, gpu(dy), gpu(x), gpu(gamma), gpu(mean), gpu(invstd), gpu(mean_dy),
                                  gpu(mean_dy_xhat));
    const Tensor dx_host = dx.to(Device::CPU);
    expect_close("dx", std::vector<float>(dx_host.data(), dx_host.data() + n),
                 std::vector<float>(dx_ref.data(), dx_ref.data() + n), 1e-5, 1e-4);
  }
}
