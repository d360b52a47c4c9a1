// nn/batchnorm2d.cpp — batch-norm layer over ops::batchnorm_* (any device), with its statistics over the
// local batch, over ghost groups, or over the global batch (docs/architecture.md, "Batch norm").
#include "nn/batchnorm2d.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hetrain/error.hpp"
#include "ops/batchnorm/batchnorm.hpp"

namespace hetrain::nn {
namespace {

// Per-channel values between the device and the host: a few hundred floats per layer and step.
std::vector<float> host_values(const Tensor& t) {
  const Tensor host = t.to(Device::CPU);
  return std::vector<float>(host.data(), host.data() + host.numel());
}
void set_values(const Tensor& t, const std::vector<float>& values) {
  Tensor host({int64_t(values.size())});
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  t.copy_from(host);
}

// running = (1 − momentum)·running + momentum·batch for both running statistics (var: unbiased).
void update_running(const Tensor& running_mean, const Tensor& running_var, const std::vector<double>& mean,
                    const std::vector<double>& unbiased_var, float momentum) {
  std::vector<float> rm = host_values(running_mean), rv = host_values(running_var);
  for (size_t c = 0; c < rm.size(); ++c) {
    rm[c] = float((1.0 - momentum) * rm[c] + momentum * mean[c]);
    rv[c] = float((1.0 - momentum) * rv[c] + momentum * unbiased_var[c]);
  }
  set_values(running_mean, rm);
  set_values(running_var, rv);
}

}  // namespace

BatchNorm2d::BatchNorm2d(ParamBuffer& pb, const std::string& name, int channels, float momentum, float eps)
    : pb_(&pb), name_(name), C_(channels), momentum_(momentum), eps_(eps) {
  gamma_ = pb.declare(name + ".weight", {C_}, ParamKind::BnWeight);
  beta_ = pb.declare(name + ".bias", {C_}, ParamKind::BnBias);
  mean_ = pb.declare_state(name + ".running_mean", {C_}, 0.0f);
  var_ = pb.declare_state(name + ".running_var", {C_}, 1.0f);
}

Tensor BatchNorm2d::forward(const Tensor& x, bool training) {
  HT_CHECK(x.ndim() == 4 && x.dim(1) == C_, name_, ": expected input [N, ", C_, ", H, W], got ",
           shape_str(x.shape()));
  x_ = x;
  const Device dev = x.device();
  Tensor y = buffer(y_, x.shape(), dev);
  trained_forward_ = training;
  if (!training) {
    ops::batchnorm_forward_eval(y, x, pb_->param(gamma_), pb_->param(beta_), pb_->state(mean_), pb_->state(var_),
                                eps_);
    return y;
  }
  const BatchNormMode* mode = batch_norm_mode();
  kind_ = mode ? mode->kind : BatchNormMode::Kind::Local;
  ensure_shape(channel_a_, {C_}, dev);
  ensure_shape(channel_b_, {C_}, dev);
  if (kind_ == BatchNormMode::Kind::Sync) {
    forward_sync(y, x, *mode);
    return y;
  }
  HT_CHECK(x.dim(0) * x.dim(2) * x.dim(3) > 1, name_,
           ": batch statistics need more than one value per channel, got input ", shape_str(x.shape()));
  if (kind_ == BatchNormMode::Kind::Ghost)
    forward_ghost(y, x, mode->ghost_group);
  else
    forward_local(y, x);
  return y;
}

void BatchNorm2d::forward_local(const Tensor& y, const Tensor& x) {
  ensure_shape(save_mean_, {C_}, x.device());
  ensure_shape(save_invstd_, {C_}, x.device());
  ops::batchnorm_forward_train(y, save_mean_, save_invstd_, pb_->state(mean_), pb_->state(var_), x,
                               pb_->param(gamma_), pb_->param(beta_), momentum_, eps_);
}

// Each group of G samples (the last may be smaller) is normalised by the plain op with its own statistics.
// The running statistics take one update per step, as in the other modes, with the groups' means and
// unbiased variances averaged weighted by their sizes: across ranks, the b_r-weighted average of
// train/running_stats.hpp then weighs every group of the global batch alike.
void BatchNorm2d::forward_ghost(const Tensor& y, const Tensor& x, int64_t group) {
  const int64_t N = x.dim(0), groups = (N + group - 1) / group;
  group_ = group;
  ensure_shape(save_mean_, {groups, C_}, x.device());
  ensure_shape(save_invstd_, {groups, C_}, x.device());
  std::vector<double> mean(static_cast<size_t>(C_), 0.0), var(static_cast<size_t>(C_), 0.0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group, end = std::min(N, begin + group);
    // At momentum 1 the op's "running" statistics become the group's own (zeroed first: 0·NaN is NaN).
    channel_a_.zero();
    channel_b_.zero();
    ops::batchnorm_forward_train(y.slice0(begin, end), save_mean_.slice0(g, g + 1).reshape({C_}),
                                 save_invstd_.slice0(g, g + 1).reshape({C_}), channel_a_, channel_b_,
                                 x.slice0(begin, end), pb_->param(gamma_), pb_->param(beta_), 1.0f, eps_);
    const std::vector<float> group_mean = host_values(channel_a_), group_var = host_values(channel_b_);
    const double share = double(end - begin) / double(N);
    for (int c = 0; c < C_; ++c) {
      mean[c] += share * group_mean[c];
      var[c] += share * group_var[c];
    }
  }
  update_running(pb_->state(mean_), pb_->state(var_), mean, var, momentum_);
}

// The global batch's statistics from every rank's per-channel sums (shifted by the running mean, which is
// the same on every rank and close to the batch mean), then the normalisation with them: the eval op
// applies given statistics. A rank without samples adds zeros and still updates its running statistics,
// so they stay the same on every rank.
void BatchNorm2d::forward_sync(const Tensor& y, const Tensor& x, const BatchNormMode& mode) {
  const Tensor running_mean = pb_->state(mean_), running_var = pb_->state(var_);
  std::vector<double> sums(size_t(2 * C_ + 1), 0.0);
  if (!mode.no_samples) {
    ops::batchnorm_stat_sums(sums.data(), x, running_mean);
    sums[2 * C_] = double(x.dim(0) * x.dim(2) * x.dim(3));
  }
  mode.sum_over_ranks(sums.data(), int(sums.size()));
  const double M = sums[2 * C_];
  HT_CHECK(M > 1, name_, ": batch statistics need more than one value per channel, the global batch has ", M);
  global_values_ = M;
  const std::vector<float> shift = host_values(running_mean);
  std::vector<double> mean(static_cast<size_t>(C_)), unbiased(static_cast<size_t>(C_));
  std::vector<float> save_mean(static_cast<size_t>(C_)), save_invstd(static_cast<size_t>(C_)), var(static_cast<size_t>(C_));
  for (int c = 0; c < C_; ++c) {
    const double d = sums[c] / M;
    const double v = std::max(0.0, sums[C_ + c] / M - d * d);  // biased: what normalisation uses
    mean[c] = double(shift[c]) + d;
    unbiased[c] = v * M / (M - 1);
    save_mean[c] = float(mean[c]);
    save_invstd[c] = float(1.0 / std::sqrt(v + double(eps_)));
    var[c] = float(v);
  }
  ensure_shape(save_mean_, {C_}, x.device());
  ensure_shape(save_invstd_, {C_}, x.device());
  set_values(save_mean_, save_mean);
  set_values(save_invstd_, save_invstd);
  set_values(channel_b_, var);
  ops::batchnorm_forward_eval(y, x, pb_->param(gamma_), pb_->param(beta_), save_mean_, channel_b_, eps_);
  update_running(running_mean, running_var, mean, unbiased, momentum_);
}

Tensor BatchNorm2d::backward(const Tensor& dy) {
  HT_CHECK(trained_forward_, name_, ": backward after an eval-mode forward (only training mode has a backward)");
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == x_.shape(), name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(x_.shape()));
  // The op always computes dx (it is what couples the batch); dropped when not needed.
  Tensor dx = buffer(dx_, x_.shape(), x_.device());
  if (kind_ == BatchNormMode::Kind::Sync)
    backward_sync(dx, dy, *batch_norm_mode());
  else if (kind_ == BatchNormMode::Kind::Ghost)
    backward_ghost(dx, dy);
  else
    ops::batchnorm_backward(dx, pb_->grad(gamma_), pb_->grad(beta_), dy, x_, pb_->param(gamma_), save_mean_,
                            save_invstd_, eps_);
  x_ = Tensor();
  return need_dx_ ? dx : Tensor();
}

void BatchNorm2d::backward_ghost(const Tensor& dx, const Tensor& dy) {
  const int64_t N = x_.dim(0), groups = save_mean_.dim(0), group = group_;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group, end = std::min(N, begin + group);
    ops::batchnorm_backward(dx.slice0(begin, end), pb_->grad(gamma_), pb_->grad(beta_), dy.slice0(begin, end),
                            x_.slice0(begin, end), pb_->param(gamma_), save_mean_.slice0(g, g + 1).reshape({C_}),
                            save_invstd_.slice0(g, g + 1).reshape({C_}), eps_);
  }
}

// The global batch's Σ dy and Σ dy·x̂, each rank's in the units of the reduced gradient (its dy times its
// reduction weight w_r), give dx of the global objective; in this rank's units (divided by w_r again) that
// is dx = γ·invstd·(dy − Σdy/(M·w_r) − x̂·Σdy·x̂/(M·w_r)). γ's and β's gradients stay this rank's own sums:
// the weighted reduction adds them up like every other parameter's.
void BatchNorm2d::backward_sync(const Tensor& dx, const Tensor& dy, const BatchNormMode& mode) {
  std::vector<double> mine(size_t(2 * C_), 0.0), sums(size_t(2 * C_), 0.0);
  if (!mode.no_samples) {
    ops::batchnorm_grad_sums(mine.data(), dy, x_, save_mean_, save_invstd_);
    for (size_t i = 0; i < sums.size(); ++i) sums[i] = mine[i] * mode.gradient_weight;
  }
  mode.sum_over_ranks(sums.data(), int(sums.size()));
  if (mode.no_samples) {
    dx.zero();
    return;
  }
  std::vector<float> dbeta = host_values(pb_->grad(beta_)), dgamma = host_values(pb_->grad(gamma_));
  std::vector<float> mean_dy(static_cast<size_t>(C_)), mean_dy_xhat(static_cast<size_t>(C_));
  const double scale = global_values_ * mode.gradient_weight;
  for (int c = 0; c < C_; ++c) {
    dbeta[c] += float(mine[c]);
    dgamma[c] += float(mine[C_ + c]);
    mean_dy[c] = float(sums[c] / scale);
    mean_dy_xhat[c] = float(sums[C_ + c] / scale);
  }
  set_values(pb_->grad(beta_), dbeta);
  set_values(pb_->grad(gamma_), dgamma);
  set_values(channel_a_, mean_dy);
  set_values(channel_b_, mean_dy_xhat);
  ops::batchnorm_backward_given(dx, dy, x_, pb_->param(gamma_), save_mean_, save_invstd_, channel_a_, channel_b_);
}

BatchNormMode parse_batch_norm_mode(const std::string& text) {
  BatchNormMode mode;
  if (text == "local") return mode;
  if (text == "sync") {
    mode.kind = BatchNormMode::Kind::Sync;
    return mode;
  }
  const std::string prefix = "ghost:";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    const std::string group = text.substr(prefix.size());
    size_t used = 0;
    long long g = 0;
    try {
      g = std::stoll(group, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    HT_CHECK(used == group.size() && used > 0 && g >= 2, "--bn ", text,
             ": the ghost group must be a whole number of samples >= 2, e.g. ghost:8");
    mode.kind = BatchNormMode::Kind::Ghost;
    mode.ghost_group = g;
    return mode;
  }
  HT_THROW("--bn: expected local, sync or ghost:G (G samples per group), got '", text, "'");
}

std::string batch_norm_mode_name(const BatchNormMode& mode) {
  switch (mode.kind) {
    case BatchNormMode::Kind::Local: return "local";
    case BatchNormMode::Kind::Sync: return "sync";
    case BatchNormMode::Kind::Ghost: return "ghost:" + std::to_string(mode.ghost_group);
  }
  return "?";
}

}  // namespace hetrain::nn
