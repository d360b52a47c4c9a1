// Links every op of hetrain/ops.hpp for float and double and runs it once on a tiny input.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "hetrain/ops.hpp"

using namespace hetrain;
using namespace hetrain::ops::cpu;

template <typename T>
void run_all_once() {
  Conv2dGeom g;
  g.N = 2; g.C = 2; g.H = 5; g.W = 5; g.K = 3; g.R = 3; g.S = 3; g.stride = 1; g.pad = 1;
  std::vector<T> in(2 * 2 * 25, T(0.5)), w(3 * 2 * 9, T(0.25)), b(3, T(1)), out(2 * 3 * 25), ws(conv2d_workspace_size(g));
  std::vector<T> dw(w.size()), db(3), din(in.size());
  conv2d_forward(out.data(), in.data(), w.data(), b.data(), g, ws.data());
  conv2d_backward(din.data(), dw.data(), db.data(), out.data(), in.data(), w.data(), g, ws.data());
  conv2d_forward_naive(out.data(), in.data(), w.data(), b.data(), g);
  conv2d_backward_naive(din.data(), dw.data(), db.data(), out.data(), in.data(), w.data(), g);
  EXPECT_NEAR(double(out[2 * 5 + 2]), 1 + 18 * 0.125, 1e-6);  // interior: 18 taps of 0.5·0.25, plus bias

  std::vector<T> lo(6), ldin(4 * 2), ldw(3 * 4), ldb(3);
  linear_forward(lo.data(), in.data(), w.data(), b.data(), 2, 4, 3);
  linear_backward(ldin.data(), ldw.data(), ldb.data(), lo.data(), in.data(), w.data(), 2, 4, 3);

  std::vector<T> sm(2), si(2), rm(2), rv(2, T(1)), gam(2, T(1)), bet(2), bo(in.size());
  batchnorm_forward_train(bo.data(), sm.data(), si.data(), rm.data(), rv.data(), in.data(), gam.data(), bet.data(),
                          2, 2, 25, T(0.1), T(1e-5));
  batchnorm_forward_eval(bo.data(), in.data(), gam.data(), bet.data(), rm.data(), rv.data(), 2, 2, 25, T(1e-5));
  batchnorm_backward(din.data(), gam.data(), bet.data(), bo.data(), in.data(), gam.data(), sm.data(), si.data(), 2,
                     2, 25);

  relu_forward(bo.data(), in.data(), int64_t(in.size()));
  relu_backward(din.data(), bo.data(), bo.data(), int64_t(in.size()));
  add_forward(bo.data(), in.data(), in.data(), int64_t(in.size()));
  accumulate(bo.data(), in.data(), int64_t(in.size()));

  Pool2dGeom pg;
  pg.N = 2; pg.C = 2; pg.H = 5; pg.W = 5; pg.kernel = 3; pg.stride = 2; pg.pad = 1;
  std::vector<T> po(2 * 2 * 9);
  std::vector<int32_t> am(po.size());
  maxpool2d_forward(po.data(), am.data(), in.data(), pg);
  maxpool2d_backward(din.data(), po.data(), am.data(), pg);
  avgpool2d_forward(po.data(), in.data(), pg);
  avgpool2d_backward(din.data(), po.data(), pg);
  global_avgpool_forward(po.data(), in.data(), 2, 2, 25);
  global_avgpool_backward(din.data(), po.data(), 2, 2, 25);

  std::vector<T> logits = {1, 2, 3, 3, 2, 1}, probs(6), dl(6);
  std::vector<int32_t> labels = {2, 1};
  const T loss = softmax_xent_forward(probs.data(), logits.data(), labels.data(), 2, 3, T(0.1));
  softmax_xent_backward(dl.data(), probs.data(), labels.data(), 2, 3, T(0.1), T(0.5));
  EXPECT_GT(double(loss), 0.0);
  EXPECT_EQ(top1_correct(logits.data(), labels.data(), 2, 3), 1);
}

TEST(OpsSmoke, EveryOpLinksAndRunsFloat) { run_all_once<float>(); }
TEST(OpsSmoke, EveryOpLinksAndRunsDouble) { run_all_once<double>(); }
