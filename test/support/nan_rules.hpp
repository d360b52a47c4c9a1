// test/support/nan_rules.hpp — every op's NaN and Inf rule: what PyTorch gives when NaN, +Inf or −Inf enter an
// op's input (and its weights and statistics, where it has them), checked on one device through the op's
// Tensor-level entry point. Shared by test/ops/nan_rules_test.cpp (Device::CPU, in test_ops) and
// test/gpu/nan_rules_test.cpp (Device::CUDA, in test_gpu and test_gpu_on_host).
//
// check_registered_ops(device) walks the op registry (ops::registered_slots, src/ops/dispatch.hpp): every
// Dispatch table must have a rule below, and every rule runs on each device whose slot the program filled.
// Adding an op means adding its rule here: one entry of rules() per table, its checks commented with what
// PyTorch gives (the values come from PyTorch 1.13 on the same inputs: torch.nn.functional, forward and
// autograd backward). A NaN expected must come out NaN, an Inf the same Inf, a finite value within
// 1e-6 + 1e-5·|value|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "checks.hpp"
#include "hetrain/tensor.hpp"
#include "ops/add/add.hpp"
#include "ops/batchnorm/batchnorm.hpp"
#include "ops/concat/concat.hpp"
#include "ops/conv2d/conv2d.hpp"
#include "ops/detect_rows/detect_rows.hpp"
#include "ops/dispatch.hpp"
#include "ops/ema/ema.hpp"
#include "ops/linear/linear.hpp"
#include "ops/nonfinite/nonfinite.hpp"
#include "ops/normalize_crop_flip/normalize_crop_flip.hpp"
#include "ops/pool/pool.hpp"
#include "ops/relu/relu.hpp"
#include "ops/scale/scale.hpp"
#include "ops/sgd/sgd.hpp"
#include "ops/silu/silu.hpp"
#include "ops/softmax_xent/softmax_xent.hpp"
#include "ops/upsample/upsample.hpp"

namespace nan_rules {

using hetrain::Device;
using hetrain::Shape;
using hetrain::Tensor;
namespace ops = hetrain::ops;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------- helpers

inline Tensor make(Device d, const Shape& shape, const std::vector<float>& v) {
  Tensor t(shape);
  EXPECT_EQ(size_t(t.numel()), v.size()) << "nan_rules: a case's values do not fill its shape";
  for (int64_t i = 0; i < t.numel() && size_t(i) < v.size(); ++i) t[i] = v[size_t(i)];
  return t.to(d);
}
inline Tensor zeros(Device d, const Shape& shape) { return Tensor(shape, d); }
inline std::vector<float> host(const Tensor& t) {
  const Tensor c = t.to(Device::CPU);
  return std::vector<float>(c.data(), c.data() + c.numel());
}
// Raw bytes (labels, uint8 images) in the storage of a float tensor on d; keep the tensor while they are used.
inline Tensor bytes_on(Device d, const void* data, size_t bytes) {
  Tensor t({int64_t((bytes + sizeof(float) - 1) / sizeof(float))});
  std::memcpy(t.data(), data, bytes);
  return t.to(d);
}
inline const int32_t* as_int32(const Tensor& t) { return reinterpret_cast<const int32_t*>(t.data()); }

// got against what PyTorch gives: NaN only where PyTorch gives NaN, the same Inf, finite values within
// 1e-6 + 1e-5·|want|.
inline void expect_like(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  test_support::expect_close(what + " (reference: PyTorch's rule)", got, want, 1e-6, 1e-5);
}
inline void expect_like(const std::string& what, const Tensor& got, const std::vector<float>& want) {
  expect_like(what, host(got), want);
}
// `clean` with NaN where `nan_mask` is set: a NaN spreads to exactly the elements it reaches.
inline std::vector<float> with_nans(std::vector<float> clean, const std::vector<int>& nan_mask) {
  for (size_t i = 0; i < clean.size() && i < nan_mask.size(); ++i)
    if (nan_mask[i]) clean[i] = kNaN;
  return clean;
}
inline std::vector<float> seq(int n, float from = 1.0f, float step = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = from + step * float(i);
  return v;
}

// ---------------------------------------------------------------- rules, by op

// x [1, 1, 4, 4] = 0..15 with NaN at (0, 1), +Inf at (2, 2), −Inf at (3, 0): one of each per 2×2 window
// (windows 0, 3 and 2), window 1 clean.
inline std::vector<float> pool_input() {
  std::vector<float> v = seq(16, 0.0f);
  v[1] = kNaN, v[10] = kInf, v[12] = -kInf;
  return v;
}

struct BnCase {
  Tensor x, gamma, beta, rmean, rvar, save_mean, save_invstd, y;
};
// x [2, 2, 2, 2] = 0..15, γ = 1, β = 0, running stats 0 and 1; `poison` is set into x[0, c, 0, 1].
inline BnCase bn_case(Device d, int channel, float poison) {
  std::vector<float> xv = seq(16, 0.0f);
  if (channel >= 0) xv[size_t(channel * 4 + 1)] = poison;
  BnCase b;
  b.x = make(d, {2, 2, 2, 2}, xv);
  b.gamma = make(d, {2}, {1, 1}), b.beta = make(d, {2}, {0, 0});
  b.rmean = make(d, {2}, {0, 0}), b.rvar = make(d, {2}, {1, 1});
  b.save_mean = zeros(d, {2}), b.save_invstd = zeros(d, {2}), b.y = zeros(d, {2, 2, 2, 2});
  ops::batchnorm_forward_train(b.y, b.save_mean, b.save_invstd, b.rmean, b.rvar, b.x, b.gamma, b.beta, 0.1f, 1e-5f);
  return b;
}
// Channel c of [2, 2, 2, 2] (elements n·8 + c·4 + j).
inline std::vector<int> channel_mask(int c) {
  std::vector<int> m(16, 0);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j) m[size_t(n * 8 + c * 4 + j)] = 1;
  return m;
}

struct ConvCase {
  Tensor x, w, b, y;
};
// x [1, 2, 4, 4] in [0.5, 1.5), w [3, 2, 3, 3], b [3], pad 1; w's centre tap of (k, c) = (1, 0) is `poison`.
inline ConvCase conv_case(Device d, ops::Conv2dOp& op, ops::HostScratch& scratch, float poison) {
  ConvCase c;
  c.x = make(d, {1, 2, 4, 4}, test_support::random_vec<float>(32, 11, 0.5, 1.5));
  std::vector<float> wv = test_support::random_vec<float>(54, 12, -1.0, 1.0);
  wv[size_t((1 * 2 + 0) * 9 + 4)] = poison;
  c.w = make(d, {3, 2, 3, 3}, wv);
  c.b = make(d, {3}, {0.1f, 0.2f, 0.3f});
  c.y = zeros(d, {1, 3, 4, 4});
  ops::Conv2dOptions o;
  o.scratch = &scratch;
  op.forward(c.y, c.x, c.w, c.b, o);
  return c;
}

// The softmax cross-entropy of one row [1, 3] with label `label`, smoothing 0.1: (mean loss, top-1 count,
// dlogits).
struct XentRow {
  double loss = 0, correct = 0;
  std::vector<float> dlogits;
};
inline XentRow xent_row(Device d, const std::vector<float>& logits, int32_t label, float smoothing = 0.1f) {
  ops::SoftmaxXentLoss loss;
  const Tensor z = make(d, {1, int64_t(logits.size())}, logits);
  const Tensor labels = bytes_on(d, &label, sizeof label);
  XentRow r;
  r.dlogits = host(loss.compute(z, as_int32(labels), smoothing, true));
  loss.read(&r.loss, &r.correct);
  return r;
}

inline void sgd_case(Device d, const std::string& what, const ops::SgdHyper& h, float wd, const std::vector<float>& p0,
                     const std::vector<float>& g, const std::vector<float>& want_p,
                     const std::vector<float>& want_v) {
  const int64_t n = int64_t(p0.size());
  const Tensor p = make(d, {n}, p0), v = zeros(d, {n}), grads = make(d, {n}, g);
  const Tensor decay = make(d, {n}, std::vector<float>(size_t(n), wd));
  ops::sgd_update(p, v, grads, decay, h, nullptr);
  expect_like(what + " parameters", p, want_p);
  if (!want_v.empty()) expect_like(what + " momentum", v, want_v);
}

// One table's rule: `check` runs the table's op on the device given and compares with PyTorch.
struct Rule {
  const char* table;
  std::function<void(Device)> check;
};

inline const std::vector<Rule>& rules() {
  static const std::vector<Rule> list = {
      // ---- element-wise
      {"relu_forward",
       [](Device d) {
         // F.relu([nan, inf, -inf, 2, -3, 0]) = [nan, inf, 0, 2, 0, 0]
         const Tensor x = make(d, {6}, {kNaN, kInf, -kInf, 2, -3, 0}), y = zeros(d, {6});
         ops::relu_forward(y, x);
         expect_like("relu_forward", y, {kNaN, kInf, 0, 2, 0, 0});
       }},
      {"relu_backward",
       [](Device d) {
         // threshold_backward(dy, y, 0) = y <= 0 ? 0 : dy: at y = NaN dy passes (dy 5 → 5), at y = 0 it does not
         // even for dy = NaN; a NaN dy where y > 0 is NaN.
         const Tensor y = make(d, {6}, {kNaN, kInf, 0, 2, 0, 1});
         const Tensor dy = make(d, {6}, {5, 5, 5, 5, kNaN, kNaN}), dx = zeros(d, {6});
         ops::relu_backward(dx, dy, y);
         expect_like("relu_backward", dx, {5, 5, 0, 5, 0, kNaN});
       }},
      {"silu_forward",
       [](Device d) {
         // F.silu([nan, inf, -inf, 1]) = [nan, inf, nan, 0.7310586] (x·σ(x) at −Inf is −Inf·0)
         const Tensor x = make(d, {4}, {kNaN, kInf, -kInf, 1}), y = zeros(d, {4});
         ops::silu_forward(y, x);
         expect_like("silu_forward", y, {kNaN, kInf, kNaN, 0.7310586f});
       }},
      {"silu_backward",
       [](Device d) {
         // autograd of F.silu at x = [nan, inf, -inf, 1] with dy = 1: [nan, nan, nan, 0.9276705];
         // silu_backward(dy = nan, x = 0.5) = nan
         const Tensor x = make(d, {5}, {kNaN, kInf, -kInf, 1, 0.5f});
         const Tensor dy = make(d, {5}, {1, 1, 1, 1, kNaN}), dx = zeros(d, {5});
         ops::silu_backward(dx, dy, x);
         expect_like("silu_backward", dx, {kNaN, kNaN, kNaN, 0.9276705f, kNaN});
       }},
      {"sigmoid_forward",
       [](Device d) {
         // torch.sigmoid([nan, inf, -inf, 1]) = [nan, 1, 0, 0.7310586]
         const Tensor x = make(d, {4}, {kNaN, kInf, -kInf, 1}), y = zeros(d, {4});
         ops::sigmoid_forward(y, x);
         expect_like("sigmoid_forward", y, {kNaN, 1, 0, 0.7310586f});
       }},
      {"sigmoid_backward",
       [](Device d) {
         // sigmoid_backward(dy = [1, 1, 1, 1, nan], y = [nan, 1, 0, 0.5, 0.5]) = [nan, 0, 0, 0.25, nan]
         const Tensor y = make(d, {5}, {kNaN, 1, 0, 0.5f, 0.5f});
         const Tensor dy = make(d, {5}, {1, 1, 1, 1, kNaN}), dx = zeros(d, {5});
         ops::sigmoid_backward(dx, dy, y);
         expect_like("sigmoid_backward", dx, {kNaN, 0, 0, 0.25f, kNaN});
       }},
      {"add",
       [](Device d) {
         // [nan, inf, inf, -inf, 1] + [1, 1, -inf, -inf, nan] = [nan, inf, nan, -inf, nan]
         const Tensor a = make(d, {5}, {kNaN, kInf, kInf, -kInf, 1}), b = make(d, {5}, {1, 1, -kInf, -kInf, kNaN});
         const Tensor y = zeros(d, {5});
         ops::add(y, a, b);
         expect_like("add", y, {kNaN, kInf, kNaN, -kInf, kNaN});
       }},
      {"accumulate",
       [](Device d) {
         // acc += x, as add: [nan, inf, nan, -inf, nan]
         const Tensor acc = make(d, {5}, {kNaN, kInf, kInf, -kInf, 1}), x = make(d, {5}, {1, 1, -kInf, -kInf, kNaN});
         ops::accumulate(acc, x);
         expect_like("accumulate", acc, {kNaN, kInf, kNaN, -kInf, kNaN});
       }},
      {"add_relu",
       [](Device d) {
         // F.relu(a + b) for the sums above: [nan, inf, nan, 0, nan]
         const Tensor a = make(d, {5}, {kNaN, kInf, kInf, -kInf, 1}), b = make(d, {5}, {1, 1, -kInf, -kInf, kNaN});
         const Tensor y = zeros(d, {5});
         ops::add_relu(y, a, b);
         expect_like("add_relu", y, {kNaN, kInf, kNaN, 0, kNaN});
       }},
      {"scale",
       [](Device d) {
         // x·a: [nan, inf, 1, -inf]·2 = [nan, inf, 2, -inf]; ·0 = [nan, nan, 0, nan]; ·nan = nan everywhere
         const std::vector<float> xv = {kNaN, kInf, 1, -kInf};
         Tensor x = make(d, {4}, xv);
         ops::scale(x, 2.0f);
         expect_like("scale by 2", x, {kNaN, kInf, 2, -kInf});
         x = make(d, {4}, xv);
         ops::scale(x, 0.0f);
         expect_like("scale by 0", x, {kNaN, kNaN, 0, kNaN});
         x = make(d, {4}, xv);
         ops::scale(x, kNaN);
         expect_like("scale by NaN", x, {kNaN, kNaN, kNaN, kNaN});
       }},
      {"count_nonfinite",
       [](Device d) {
         // (~torch.isfinite([nan, inf, -inf, 1, 0, -0])).sum() = 3
         const Tensor x = make(d, {6}, {kNaN, kInf, -kInf, 1, 0, -0.0f});
         EXPECT_EQ(ops::count_nonfinite(x), 3) << "count_nonfinite";
       }},
      // ---- optimizer and averages
      {"ema_update",
       [](Device d) {
         // ModelEMA: v *= d; v += (1 − d)·x. d = 0.9, v = [1, 2, inf, nan], x = [nan, inf, 1, 1]: [nan, inf, inf, nan];
         // d = 1, v = [1, inf], x = [inf, 1]: (1 − d)·inf = 0·inf, so [nan, inf]
         Tensor avg = make(d, {4}, {1, 2, kInf, kNaN});
         ops::ema_update(avg, make(d, {4}, {kNaN, kInf, 1, 1}), 0.9f);
         expect_like("ema_update decay 0.9", avg, {kNaN, kInf, kInf, kNaN});
         avg = make(d, {2}, {1, kInf});
         ops::ema_update(avg, make(d, {2}, {kInf, 1}), 1.0f);
         expect_like("ema_update decay 1", avg, {kNaN, kInf});
       }},
      {"sgd_update",
       [](Device d) {
         // torch.optim.SGD(lr 0.1, momentum 0.9) one step on p = [1, 2, inf, 3], grad = [nan, inf, 1, -inf]:
         //   weight_decay 0:    p = [nan, -inf, inf, inf], buf = [nan, inf, 1, -inf] (no decay term: inf stays inf)
         //   weight_decay 1e-4: p = [nan, -inf, nan, inf], buf = [nan, inf, inf, -inf]
         // the same with nesterov; momentum 0, p = [1, 2, inf], grad = [nan, inf, 1]: p = [nan, -inf, inf]
         const std::vector<float> p0 = {1, 2, kInf, 3}, g = {kNaN, kInf, 1, -kInf};
         for (bool nesterov : {false, true}) {
           ops::SgdHyper h;
           h.lr = 0.1f, h.momentum = 0.9f, h.nesterov = nesterov;
           const std::string what = nesterov ? "sgd_update nesterov" : "sgd_update";
           sgd_case(d, what + " weight decay 0", h, 0.0f, p0, g, {kNaN, -kInf, kInf, kInf}, {kNaN, kInf, 1, -kInf});
           sgd_case(d, what + " weight decay 1e-4", h, 1e-4f, p0, g, {kNaN, -kInf, kNaN, kInf},
                    {kNaN, kInf, kInf, -kInf});
         }
         ops::SgdHyper h;
         h.lr = 0.1f, h.momentum = 0.0f;
         sgd_case(d, "sgd_update momentum 0", h, 0.0f, {1, 2, kInf}, {kNaN, kInf, 1}, {kNaN, -kInf, kInf}, {});
       }},
      // ---- copies
      {"copy_channels",
       [](Device d) {
         // torch.cat of [nan, 1] and [inf, -inf] (channels, 1×1 planes): [nan, 1, inf, -inf]
         const Tensor a = make(d, {1, 2, 1, 1}, {kNaN, 1}), b = make(d, {1, 2, 1, 1}, {kInf, -kInf});
         const Tensor y = zeros(d, {1, 4, 1, 1});
         ops::concat_channels_forward(y, {a, b});
         expect_like("concat_channels_forward", y, {kNaN, 1, kInf, -kInf});
         const Tensor da = zeros(d, {1, 2, 1, 1}), db = zeros(d, {1, 2, 1, 1});
         ops::concat_channels_backward({da, db}, y);
         expect_like("concat_channels_backward first", da, {kNaN, 1});
         expect_like("concat_channels_backward second", db, {kInf, -kInf});
       }},
      {"upsample_nearest_forward",
       [](Device d) {
         // F.interpolate([[0, nan], [inf, 3]], scale_factor=2, mode='nearest'): each value a 2×2 block
         const Tensor x = make(d, {1, 1, 2, 2}, {0, kNaN, kInf, 3}), y = zeros(d, {1, 1, 4, 4});
         ops::upsample_nearest_forward(y, x, 2);
         expect_like("upsample_nearest_forward", y,
                     {0, 0, kNaN, kNaN, 0, 0, kNaN, kNaN, kInf, kInf, 3, 3, kInf, kInf, 3, 3});
       }},
      {"upsample_nearest_backward",
       [](Device d) {
         // its backward with dy = 1 but dy[0, 0] = nan, dy[3, 3] = inf: [[nan, 4], [4, inf]]
         std::vector<float> dyv(16, 1.0f);
         dyv[0] = kNaN, dyv[15] = kInf;
         const Tensor dy = make(d, {1, 1, 4, 4}, dyv), dx = zeros(d, {1, 1, 2, 2});
         ops::upsample_nearest_backward(dx, dy, 2);
         expect_like("upsample_nearest_backward", dx, {kNaN, 4, 4, kInf});
       }},
      {"detect_rows_forward",
       [](Device d) {
         // view + permute (a copy): x [1, 2 fields, 1, 2] = [[nan, 1], [inf, -inf]] gives rows (nan, inf), (1, -inf)
         const Tensor x = make(d, {1, 2, 1, 2}, {kNaN, 1, kInf, -kInf}), out = zeros(d, {1, 2, 2});
         ops::detect_rows_forward(out, 0, x, 1);
         expect_like("detect_rows_forward", out, {kNaN, kInf, 1, -kInf});
       }},
      {"detect_rows_backward",
       [](Device d) {
         // the inverse copy
         const Tensor dout = make(d, {1, 2, 2}, {kNaN, kInf, 1, -kInf}), dx = zeros(d, {1, 2, 1, 2});
         ops::detect_rows_backward(dx, dout, 0, 1);
         expect_like("detect_rows_backward", dx, {kNaN, 1, kInf, -kInf});
       }},
      {"normalize_crop_flip",
       [](Device d) {
         // transforms.Normalize(mean, std): (x/255 − mean)/std; a NaN mean gives a NaN channel; a zero std is
         // refused ("std evaluated to zero"), here a NaN std too. Image [1, 2, 1, 2] of uint8 [0, 255 | 51, 0].
         const uint8_t pixels[4] = {0, 255, 51, 0};
         const Tensor in = bytes_on(d, pixels, sizeof pixels);
         const uint8_t* image = reinterpret_cast<const uint8_t*>(in.data());
         hetrain::ImageGeom g;
         g.N = 1, g.C = 2, g.H = 1, g.W = 2, g.out_h = 1, g.out_w = 2, g.pad = 0;
         g.mean[0] = kNaN, g.std[0] = 1;
         g.mean[1] = 0.2f, g.std[1] = 0.5f;
         const Tensor out = zeros(d, {1, 2, 1, 2});
         ops::normalize_crop_flip(out, image, nullptr, g);
         expect_like("normalize_crop_flip", out, {kNaN, kNaN, 0.0f, -0.4f});
         for (float bad : {0.0f, kNaN}) {
           g.std[1] = bad;
           EXPECT_THROW(ops::normalize_crop_flip(out, image, nullptr, g), std::exception)
               << "normalize_crop_flip with std " << bad << ": torchvision refuses a zero std";
         }
       }},
      // ---- pooling
      {"maxpool2d_forward",
       [](Device d) {
         // F.max_pool2d(x, 2) of pool_input(): a NaN in the window wins, Inf as a number: [[nan, 7], [13, inf]];
         // a window of −Inf only gives −Inf
         const Tensor x = make(d, {1, 1, 4, 4}, pool_input()), y = zeros(d, {1, 1, 2, 2});
         ops::MaxPoolSaved saved;
         ops::maxpool2d_forward(y, x, ops::PoolWindow{}, saved, false);
         expect_like("maxpool2d_forward", y, {kNaN, 7, 13, kInf});
         const Tensor ninf = make(d, {1, 1, 2, 2}, {-kInf, -kInf, -kInf, -kInf}), y1 = zeros(d, {1, 1, 1, 1});
         ops::maxpool2d_forward(y1, ninf, ops::PoolWindow{}, saved, false);
         expect_like("maxpool2d_forward of -inf", y1, {-kInf});
       }},
      {"maxpool2d_backward",
       [](Device d) {
         // autograd of F.max_pool2d(x, 2), dy = [nan, 1, 1, 1]: each dy goes to its window's maximum, the NaN
         // (0, 1) of window 0 (which takes the NaN dy), 7, 13 and the inf; every other dx is 0
         const Tensor x = make(d, {1, 1, 4, 4}, pool_input()), y = zeros(d, {1, 1, 2, 2});
         ops::MaxPoolSaved saved;
         ops::maxpool2d_forward(y, x, ops::PoolWindow{}, saved, true);
         const Tensor dy = make(d, {1, 1, 2, 2}, {kNaN, 1, 1, 1}), dx = zeros(d, {1, 1, 4, 4});
         ops::maxpool2d_backward(dx, dy, saved);
         std::vector<float> want(16, 0.0f);
         want[1] = kNaN, want[7] = 1, want[13] = 1, want[10] = 1;
         expect_like("maxpool2d_backward", dx, want);
       }},
      {"avgpool2d_forward",
       [](Device d) {
         // F.avg_pool2d(x, 2) of pool_input(): [[nan, 4.5], [-inf, inf]]
         const Tensor x = make(d, {1, 1, 4, 4}, pool_input()), y = zeros(d, {1, 1, 2, 2});
         ops::avgpool2d_forward(y, x, ops::PoolWindow{});
         expect_like("avgpool2d_forward", y, {kNaN, 4.5f, -kInf, kInf});
       }},
      {"avgpool2d_backward",
       [](Device d) {
         // its backward with dy = [nan, 1, 1, 1]: window 0's four inputs nan, the others 0.25
         const Tensor x = make(d, {1, 1, 4, 4}, pool_input()), dx = zeros(d, {1, 1, 4, 4});
         ops::avgpool2d_backward(dx, make(d, {1, 1, 2, 2}, {kNaN, 1, 1, 1}), x, ops::PoolWindow{});
         std::vector<float> want(16, 0.25f);
         want[0] = want[1] = want[4] = want[5] = kNaN;
         expect_like("avgpool2d_backward", dx, want);
       }},
      {"global_avgpool_forward",
       [](Device d) {
         // x.mean((2, 3)) of [1, 2, 2, 2] with a nan in channel 0 and an inf in channel 1: [nan, inf]
         const Tensor x = make(d, {1, 2, 2, 2}, {0, kNaN, 2, 3, kInf, 5, 6, 7}), y = zeros(d, {1, 2});
         ops::global_avgpool_forward(y, x);
         expect_like("global_avgpool_forward", y, {kNaN, kInf});
       }},
      {"global_avgpool_backward",
       [](Device d) {
         // its backward with dy = [nan, inf]: plane 0 nan, plane 1 inf/4 = inf
         const Tensor dx = zeros(d, {1, 2, 2, 2});
         ops::global_avgpool_backward(dx, make(d, {1, 2}, {kNaN, kInf}));
         expect_like("global_avgpool_backward", dx, {kNaN, kNaN, kNaN, kNaN, kInf, kInf, kInf, kInf});
       }},
      // ---- batch norm
      {"batchnorm_forward_train",
       [](Device d) {
         // F.batch_norm(training=True, momentum=0.1) of x [2, 2, 2, 2] = 0..15 with x[0, 0, 0, 1] = nan: channel 0
         // all nan, its running mean and var nan; channel 1 as without it. With +inf there: channel 0 nan,
         // running mean inf, running var nan. γ[1] = nan: channel 1 nan.
         const BnCase clean = bn_case(d, -1, 0);
         const std::vector<float> yc = host(clean.y), rmc = host(clean.rmean), rvc = host(clean.rvar),
                                  smc = host(clean.save_mean);
         BnCase b = bn_case(d, 0, kNaN);
         expect_like("batchnorm_forward_train NaN input", b.y, with_nans(yc, channel_mask(0)));
         expect_like("batchnorm_forward_train NaN input: running mean", b.rmean, {kNaN, rmc[1]});
         expect_like("batchnorm_forward_train NaN input: running var", b.rvar, {kNaN, rvc[1]});
         expect_like("batchnorm_forward_train NaN input: saved mean", b.save_mean, {kNaN, smc[1]});
         b = bn_case(d, 0, kInf);
         expect_like("batchnorm_forward_train Inf input", b.y, with_nans(yc, channel_mask(0)));
         expect_like("batchnorm_forward_train Inf input: running mean", b.rmean, {kInf, rmc[1]});
         expect_like("batchnorm_forward_train Inf input: running var", b.rvar, {kNaN, rvc[1]});
         // γ = [1, nan]
         const Tensor x = make(d, {2, 2, 2, 2}, seq(16, 0.0f)), y = zeros(d, {2, 2, 2, 2});
         const Tensor sm = zeros(d, {2}), si = zeros(d, {2});
         ops::batchnorm_forward_train(y, sm, si, make(d, {2}, {0, 0}), make(d, {2}, {1, 1}), x,
                                      make(d, {2}, {1, kNaN}), make(d, {2}, {0, 0}), 0.1f, 1e-5f);
         expect_like("batchnorm_forward_train NaN weight", y, with_nans(yc, channel_mask(1)));
       }},
      {"batchnorm_forward_eval",
       [](Device d) {
         // F.batch_norm(training=False): element-wise, so a nan input is nan alone; a nan running mean makes its
         // channel nan; an inf running var makes its channel β (x·1/sqrt(inf) = 0): here 0.
         const std::vector<float> xv = seq(16, 0.0f);
         const Tensor x = make(d, {2, 2, 2, 2}, xv), g = make(d, {2}, {1, 1}), b = make(d, {2}, {0, 0});
         const Tensor yc = zeros(d, {2, 2, 2, 2});
         ops::batchnorm_forward_eval(yc, x, g, b, make(d, {2}, {0, 0}), make(d, {2}, {1, 1}), 1e-5f);
         const std::vector<float> clean = host(yc);
         std::vector<float> xn = xv;
         xn[1] = kNaN;
         const Tensor y = zeros(d, {2, 2, 2, 2});
         ops::batchnorm_forward_eval(y, make(d, {2, 2, 2, 2}, xn), g, b, make(d, {2}, {0, 0}), make(d, {2}, {1, 1}),
                                     1e-5f);
         std::vector<int> one(16, 0);
         one[1] = 1;
         expect_like("batchnorm_forward_eval NaN input", y, with_nans(clean, one));
         ops::batchnorm_forward_eval(y, x, g, b, make(d, {2}, {kNaN, 0}), make(d, {2}, {1, kInf}), 1e-5f);
         std::vector<float> want = with_nans(clean, channel_mask(0));
         for (int n = 0; n < 2; ++n)
           for (int j = 0; j < 4; ++j) want[size_t(n * 8 + 4 + j)] = 0;
         expect_like("batchnorm_forward_eval NaN mean, Inf var", y, want);
       }},
      {"batchnorm_backward",
       [](Device d) {
         // autograd of F.batch_norm(training=True) with dy = 1 but dy[0, 0, 0, 0] = nan: dx of channel 0 nan,
         // dγ[0] and dβ[0] nan; channel 1 as without it. A nan input (its saved mean nan) does the same.
         for (bool nan_input : {false, true}) {
           const std::string what = nan_input ? "batchnorm_backward NaN input" : "batchnorm_backward NaN dy";
           const BnCase clean = bn_case(d, -1, 0);
           const BnCase b = nan_input ? bn_case(d, 0, kNaN) : clean;
           std::vector<float> dyv(16, 1.0f);
           for (int i = 0; i < 16; ++i) dyv[size_t(i)] = 0.1f * float(i % 5) - 0.2f;
           const Tensor dy_clean = make(d, {2, 2, 2, 2}, dyv);
           if (!nan_input) dyv[0] = kNaN;
           const Tensor dy = make(d, {2, 2, 2, 2}, dyv);
           const Tensor dxc = zeros(d, {2, 2, 2, 2}), dgc = zeros(d, {2}), dbc = zeros(d, {2});
           ops::batchnorm_backward(dxc, dgc, dbc, dy_clean, clean.x, clean.gamma, clean.save_mean, clean.save_invstd,
                                   1e-5f);
           const Tensor dx = zeros(d, {2, 2, 2, 2}), dg = zeros(d, {2}), db = zeros(d, {2});
           ops::batchnorm_backward(dx, dg, db, dy, b.x, b.gamma, b.save_mean, b.save_invstd, 1e-5f);
           expect_like(what + ": dx", dx, with_nans(host(dxc), channel_mask(0)));
           expect_like(what + ": dgamma", dg, {kNaN, host(dgc)[1]});
           if (!nan_input) expect_like(what + ": dbeta", db, {kNaN, host(dbc)[1]});
         }
       }},
      {"batchnorm_stat_sums",
       [](Device d) {
         // SyncBatchNorm's batch_norm_stats: a nan in channel 0 makes its mean and variance sums nan
         std::vector<float> xv = seq(16, 0.0f);
         xv[1] = kNaN;
         std::vector<double> sums(4, 0.0);
         ops::batchnorm_stat_sums(sums.data(), make(d, {2, 2, 2, 2}, xv), make(d, {2}, {1, 1}));
         EXPECT_TRUE(std::isnan(sums[0]) && std::isnan(sums[2])) << "batchnorm_stat_sums: channel 0 gives " << sums[0]
                                                                 << ", " << sums[2] << "; PyTorch gives nan";
         EXPECT_TRUE(std::isfinite(sums[1]) && std::isfinite(sums[3])) << "batchnorm_stat_sums: channel 1 gives "
                                                                       << sums[1] << ", " << sums[3];
       }},
      {"batchnorm_grad_sums",
       [](Device d) {
         // SyncBatchNorm's batch_norm_backward_reduce: a nan dy in channel 0 makes Σdy and Σdy·x̂ nan
         std::vector<float> dyv(16, 1.0f);
         dyv[0] = kNaN;
         std::vector<double> sums(4, 0.0);
         ops::batchnorm_grad_sums(sums.data(), make(d, {2, 2, 2, 2}, dyv), make(d, {2, 2, 2, 2}, seq(16, 0.0f)),
                                  make(d, {2}, {1, 1}), make(d, {2}, {1, 1}));
         EXPECT_TRUE(std::isnan(sums[0]) && std::isnan(sums[2])) << "batchnorm_grad_sums: channel 0 gives " << sums[0]
                                                                 << ", " << sums[2] << "; PyTorch gives nan";
         EXPECT_TRUE(std::isfinite(sums[1]) && std::isfinite(sums[3])) << "batchnorm_grad_sums: channel 1 gives "
                                                                       << sums[1] << ", " << sums[3];
       }},
      {"batchnorm_backward_given",
       [](Device d) {
         // batch_norm_backward_elemt is element-wise: a nan dy gives a nan dx there alone; a nan mean_dy[c] (the
         // exchanged sums of a channel with a nan) makes channel c nan
         const Tensor x = make(d, {2, 2, 2, 2}, seq(16, 0.0f)), g = make(d, {2}, {1, 1});
         const Tensor mean = make(d, {2}, {1, 2}), invstd = make(d, {2}, {0.5f, 0.25f});
         std::vector<float> dyv(16, 1.0f);
         const Tensor dxc = zeros(d, {2, 2, 2, 2});
         ops::batchnorm_backward_given(dxc, make(d, {2, 2, 2, 2}, dyv), x, g, mean, invstd, make(d, {2}, {0.1f, 0.2f}),
                                       make(d, {2}, {0.3f, 0.4f}));
         const std::vector<float> clean = host(dxc);
         dyv[0] = kNaN;
         const Tensor dx = zeros(d, {2, 2, 2, 2});
         ops::batchnorm_backward_given(dx, make(d, {2, 2, 2, 2}, dyv), x, g, mean, invstd, make(d, {2}, {0.1f, 0.2f}),
                                       make(d, {2}, {0.3f, 0.4f}));
         std::vector<int> one(16, 0);
         one[0] = 1;
         expect_like("batchnorm_backward_given NaN dy", dx, with_nans(clean, one));
         dyv[0] = 1.0f;
         ops::batchnorm_backward_given(dx, make(d, {2, 2, 2, 2}, dyv), x, g, mean, invstd, make(d, {2}, {kNaN, 0.2f}),
                                       make(d, {2}, {0.3f, 0.4f}));
         expect_like("batchnorm_backward_given NaN mean_dy", dx, with_nans(clean, channel_mask(0)));
       }},
      // ---- products
      {"linear_forward",
       [](Device d) {
         // F.linear(x [2, 3], W [4, 3], b): W[1, 2] = nan makes output column 1 nan for every row, a zero row
         // included (0·nan = nan); b[3] = inf makes column 3 inf
         const std::vector<float> xv = {0, 0, 0, 0.5f, -1, 2};
         std::vector<float> wv = test_support::random_vec<float>(12, 21), bv = {0.1f, 0.2f, 0.3f, 0.4f};
         const Tensor x = make(d, {2, 3}, xv), yc = zeros(d, {2, 4});
         ops::linear_forward(yc, x, make(d, {4, 3}, wv), make(d, {4}, bv));
         std::vector<float> want = host(yc);
         wv[1 * 3 + 2] = kNaN, bv[3] = kInf;
         const Tensor y = zeros(d, {2, 4});
         ops::linear_forward(y, x, make(d, {4, 3}, wv), make(d, {4}, bv));
         want[1] = want[5] = kNaN, want[3] = want[7] = kInf;
         expect_like("linear_forward", y, want);
       }},
      {"linear_backward",
       [](Device d) {
         // autograd of F.linear: W[1, 2] = nan makes dx[:, 2] nan (dW, db finite); dy[0, 1] = nan makes dx's row 0,
         // dW's row 1 and db[1] nan
         const std::vector<float> xv = test_support::random_vec<float>(6, 31), dyv = test_support::random_vec<float>(8, 32);
         std::vector<float> wv = test_support::random_vec<float>(12, 33);
         auto run = [&](const std::vector<float>& w, const std::vector<float>& dy, std::vector<float>* dx,
                        std::vector<float>* dw, std::vector<float>* db) {
           const Tensor tdx = zeros(d, {2, 3}), tdw = zeros(d, {4, 3}), tdb = zeros(d, {4});
           ops::linear_backward(tdx, tdw, tdb, make(d, {2, 4}, dy), make(d, {2, 3}, xv), make(d, {4, 3}, w));
           *dx = host(tdx), *dw = host(tdw), *db = host(tdb);
         };
         std::vector<float> dx0, dw0, db0, dx, dw, db;
         run(wv, dyv, &dx0, &dw0, &db0);
         std::vector<float> wn = wv;
         wn[1 * 3 + 2] = kNaN;
         run(wn, dyv, &dx, &dw, &db);
         expect_like("linear_backward NaN weight: dx", dx, with_nans(dx0, {0, 0, 1, 0, 0, 1}));
         expect_like("linear_backward NaN weight: dw", dw, dw0);
         expect_like("linear_backward NaN weight: db", db, db0);
         std::vector<float> dyn = dyv;
         dyn[1] = kNaN;
         run(wv, dyn, &dx, &dw, &db);
         expect_like("linear_backward NaN dy: dx", dx, with_nans(dx0, {1, 1, 1, 0, 0, 0}));
         expect_like("linear_backward NaN dy: dw", dw, with_nans(dw0, {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
         expect_like("linear_backward NaN dy: db", db, with_nans(db0, {0, 1, 0, 0}));
       }},
      {"conv2d",
       [](Device d) {
         // F.conv2d(x [1, 2, 4, 4], w [3, 2, 3, 3], b, padding=1) with w[1, 0, 1, 1] = nan (the centre tap, which
         // every output of channel 1 reads): output channel 1 all nan, channels 0 and 2 as without it. Backward
         // with dy = 1: dx of input channel 0 all nan (every input meets the tap), input channel 1 and dw, db as
         // without it. With +inf and −inf taps of one filter (on positive inputs): that output channel nan.
         ops::HostScratch scratch;
         ops::Conv2dOp op(3, 3, 1, 1);
         const ConvCase clean = conv_case(d, op, scratch, 0.5f);
         const std::vector<float> yc = host(clean.y);
         const ConvCase c = conv_case(d, op, scratch, kNaN);
         std::vector<int> ch1(48, 0);
         for (int j = 16; j < 32; ++j) ch1[size_t(j)] = 1;
         expect_like("conv2d forward NaN weight", c.y, with_nans(yc, ch1));
         ops::Conv2dOptions o;
         o.scratch = &scratch;
         std::vector<float> ones(48, 1.0f);
         const Tensor dy = make(d, {1, 3, 4, 4}, ones);
         const Tensor dxc = zeros(d, {1, 2, 4, 4}), dwc = zeros(d, {3, 2, 3, 3}), dbc = zeros(d, {3});
         op.backward(dxc, dwc, dbc, dy, clean.x, clean.w, o);
         const Tensor dx = zeros(d, {1, 2, 4, 4}), dw = zeros(d, {3, 2, 3, 3}), db = zeros(d, {3});
         op.backward(dx, dw, db, dy, c.x, c.w, o);
         std::vector<int> in0(32, 0);
         for (int j = 0; j < 16; ++j) in0[size_t(j)] = 1;
         expect_like("conv2d backward NaN weight: dx", dx, with_nans(host(dxc), in0));
         expect_like("conv2d backward NaN weight: dw", dw, host(dwc));
         expect_like("conv2d backward NaN weight: db", db, host(dbc));
         // +inf and −inf taps in filter 1 (both read positive inputs everywhere without padding).
         ops::Conv2dOp op0(3, 3, 1, 0);
         std::vector<float> wv = test_support::random_vec<float>(54, 12, 0.1, 1.0);
         wv[size_t((1 * 2 + 0) * 9 + 4)] = kInf, wv[size_t((1 * 2 + 1) * 9 + 4)] = -kInf;
         const Tensor y = zeros(d, {1, 3, 2, 2});
         op0.forward(y, clean.x, make(d, {3, 2, 3, 3}, wv), Tensor(), o);
         const std::vector<float> yv = host(y);
         for (int j = 0; j < 12; ++j)
           EXPECT_EQ(std::isnan(yv[size_t(j)]), j >= 4 && j < 8)
               << "conv2d forward with +inf and -inf taps: output " << j << " is " << yv[size_t(j)]
               << "; PyTorch gives nan exactly in channel 1";
       }},
      // ---- loss
      {"softmax_xent",
       [](Device d) {
         // F.cross_entropy(label_smoothing=0.1) of one row [3]: a nan logit, a +inf logit, or all −inf give a nan
         // loss, nan probabilities (log_softmax) and nan gradients; a −inf logit gives an inf loss (the smoothing
         // term reads it) with finite gradients; torch.argmax takes the first nan (a nan beats every number).
         for (const auto& row : std::vector<std::vector<float>>{{kNaN, 1, 2}, {kInf, 1, 2}, {-kInf, -kInf, -kInf}}) {
           const XentRow r = xent_row(d, row, 1);
           EXPECT_TRUE(std::isnan(r.loss)) << "softmax_xent of [" << row[0] << ", " << row[1] << ", " << row[2]
                                           << "]: loss " << r.loss << "; PyTorch gives nan";
           expect_like("softmax_xent gradient of a row with " + std::to_string(row[0]), r.dlogits, {kNaN, kNaN, kNaN});
         }
         const XentRow r = xent_row(d, {-kInf, 1, 2}, 1);
         EXPECT_TRUE(std::isinf(r.loss) && r.loss > 0) << "softmax_xent of [-inf, 1, 2]: loss " << r.loss
                                                       << "; PyTorch gives inf";
         // F.cross_entropy gradient of [-inf, 1, 2], label 1: [-0.0333333, -0.6643919, 0.6977252]
         expect_like("softmax_xent gradient of [-inf, 1, 2]", r.dlogits, {-0.0333333f, -0.6643919f, 0.6977252f});
         // without smoothing the label's term alone: F.cross_entropy([-inf, 1, 2], 1) = 1.3132616
         const XentRow plain = xent_row(d, {-kInf, 1, 2}, 1, 0.0f);
         EXPECT_NEAR(plain.loss, 1.3132616, 1e-5) << "softmax_xent of [-inf, 1, 2] without smoothing";
         // torch.argmax([1, nan, 2]) = 1, torch.argmax([1, inf, 2]) = 1
         EXPECT_EQ(xent_row(d, {1, kNaN, 2}, 1).correct, 1.0) << "top-1 of [1, nan, 2]: torch.argmax gives 1";
         EXPECT_EQ(xent_row(d, {1, kInf, 2}, 1).correct, 1.0) << "top-1 of [1, inf, 2]: torch.argmax gives 1";
         EXPECT_EQ(xent_row(d, {kNaN, 3, kNaN}, 0).correct, 1.0) << "top-1 of [nan, 3, nan]: torch.argmax gives 0";
       }},
  };
  return list;
}

// ---------------------------------------------------------------- the walk

// Every table the program registered for `device` has a rule (a missing one fails naming the table), every
// rule names a table the program has, and each rule runs on `device`. Returns how many rules ran.
inline int check_registered_ops(Device device) {
  const std::vector<ops::RegisteredSlot>& slots = ops::registered_slots();
  EXPECT_FALSE(slots.empty()) << "the op registry is empty: was the ops archive linked whole?";
  auto rule_for = [](const std::string& table) -> const Rule* {
    for (const Rule& r : rules())
      if (table == r.table) return &r;
    return nullptr;
  };
  for (const ops::RegisteredSlot& s : slots)
    if (!rule_for(s.table))
      ADD_FAILURE() << "op table '" << s.table << "' (" << hetrain::device_name(s.device)
                    << " slot) has no NaN rule: add one to rules() in test/support/nan_rules.hpp, with what PyTorch "
                       "gives for NaN, +Inf and -Inf in its inputs";
  int ran = 0;
  for (const Rule& r : rules()) {
    bool known = false, here = false;
    for (const ops::RegisteredSlot& s : slots)
      if (std::string(s.table) == r.table) known = true, here = here || s.device == device;
    EXPECT_TRUE(known) << "test/support/nan_rules.hpp has a rule for '" << r.table
                       << "', which no op registers: rename or remove it";
    if (!here) continue;
    SCOPED_TRACE(std::string("NaN rule of ") + r.table + " on " + hetrain::device_name(device));
    try {
      r.check(device);
    } catch (const std::exception& e) {
      ADD_FAILURE() << r.table << " threw: " << e.what();
    }
    ++ran;
  }
  return ran;
}

}  // namespace nan_rules
