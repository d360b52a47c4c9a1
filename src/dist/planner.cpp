// BalancePlanner: when to change the split (calibration, every K steps, hysteresis) — no MPI here.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "hetrain/dist/balance.hpp"
#include "dist/agreed.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

BalanceMode parse_balance_mode(const std::string& text) {
  if (text == "none") return BalanceMode::None;
  if (text == "static") return BalanceMode::Static;
  if (text == "dynamic") return BalanceMode::Dynamic;
  HT_AGREED_THROW("--balance: expected none, static or dynamic, got '", text, "'");
}

const char* balance_mode_name(BalanceMode mode) {
  switch (mode) {
    case BalanceMode::None: return "none";
    case BalanceMode::Static: return "static";
    case BalanceMode::Dynamic: return "dynamic";
  }
  return "?";
}

std::vector<int64_t> resolve_caps(const BalanceConfig& c, int n, int64_t B) {
  HT_AGREED_CHECK(n >= 1, "balancer: world size must be >= 1, got ", n);
  HT_AGREED_CHECK(B >= 1, "global batch must be >= 1, got ", B);
  HT_AGREED_CHECK(c.rebalance_every >= 1, "--rebalance-every must be >= 1, got ", c.rebalance_every);
  HT_AGREED_CHECK(c.mode == BalanceMode::None || c.calibration_steps >= 1, "balancer: calibration steps must be >= 1, got ",
           c.calibration_steps);
  HT_AGREED_CHECK(c.window >= 0, "balancer: window must be >= 0, got ", c.window);
  HT_AGREED_CHECK(c.decay > 0 && c.decay <= 1, "balancer: decay must be in (0, 1], got ", c.decay);
  HT_AGREED_CHECK(c.hysteresis >= 0 && c.hysteresis < 1, "balancer: hysteresis must be in [0, 1), got ", c.hysteresis);
  HT_AGREED_CHECK(c.caps.size() <= 1 || c.caps.size() == size_t(n), "--max-local-batch: expected one value or one per rank (",
           n, "), got ", c.caps.size(), " values");
  std::vector<int64_t> caps(size_t(n), INT64_MAX);
  for (size_t r = 0; r < c.caps.size(); ++r)
    HT_AGREED_CHECK(c.caps[r] >= 1, "--max-local-batch: caps must be >= 1, got ", c.caps[r],
             c.caps.size() > 1 ? " for rank " + std::to_string(r) : std::string());
  if (c.caps.size() == 1) caps.assign(size_t(n), c.caps[0]);
  else if (c.caps.size() == size_t(n)) caps = c.caps;
  int64_t room = 0;
  for (int64_t cap : caps) room = (cap >= INT64_MAX - room) ? INT64_MAX : room + cap;
  HT_AGREED_CHECK(room >= B, "--max-local-batch: caps sum to ", room, " over ", n, " ranks, less than the global batch ", B);
  return caps;
}

namespace {
// A second batch size for every rank (Σ still B): pretend speeds 1.5, 0.5, 1.5, ... (0.75 for the last of an
// odd count) so each rank's b moves well away from B/n and the fit sees slope and intercept.
std::vector<int64_t> perturbed_split(int n, int64_t B, const std::vector<int64_t>& caps) {
  if (n == 1) return {B};
  std::vector<CostModel> pretend(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    double f = (r % 2 == 0) ? 1.5 : 0.5;
    if (n % 2 == 1 && r == n - 1) f = 0.75;
    pretend[r] = {0.0, 1.0 / f};
  }
  return solve_split(pretend, caps, B);
}

std::string join(const std::vector<double>& v, const char* fmt) {
  std::string s = "[";
  char buf[64];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, fmt, v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}
}  // namespace

BalancePlanner::BalancePlanner(int n, int64_t B, const BalanceConfig& config)
    : n_(n), B_(B), config_(config), caps_(resolve_caps(config, n, B)) {
  std::vector<int64_t> binding = caps_;
  bool any = false;
  for (int64_t c : caps_) any = any || c < B;
  if (!any) binding.clear();  // no cap can bind: plain B/n with the remainder to the first ranks
  uniform_ = uniform_split(n, B, binding);
  perturbed_ = config.mode == BalanceMode::None ? uniform_ : perturbed_split(n, B, binding);
  caps_ = binding;
  split_ = uniform_;
}

bool BalancePlanner::needs_models(int64_t step) const {
  if (config_.mode == BalanceMode::None) return false;
  const int64_t first_fit = 2 * config_.calibration_steps - 1;
  if (step == first_fit) return true;
  return config_.mode == BalanceMode::Dynamic && step > first_fit && (step - first_fit) % config_.rebalance_every == 0;
}

bool BalancePlanner::may_refit_early(int64_t step) const {
  return config_.mode == BalanceMode::Dynamic && step > 2 * config_.calibration_steps - 1;
}

void BalancePlanner::set_split(const std::vector<int64_t>& split) {
  HT_CHECK(split.size() == size_t(n_), "balancer: split for ", split.size(), " ranks, world has ", n_);
  int64_t sum = 0;
  for (int r = 0; r < n_; ++r) {
    HT_CHECK(split[r] >= 0 && (caps_.empty() || split[r] <= caps_[r]), "balancer: share ", split[r], " of rank ", r,
             " outside [0, cap]");
    sum += split[r];
  }
  HT_CHECK(sum == B_, "balancer: split sums to ", sum, ", global batch is ", B_);
  split_ = split;
}

bool BalancePlanner::advance(int64_t step, const std::vector<CostModel>& models, bool early) {
  if (config_.mode == BalanceMode::None) return false;
  const std::vector<int64_t> before = split_;
  if (step == config_.calibration_steps - 1) split_ = perturbed_;  // calibration phase 2 starts
  if (needs_models(step) || (early && may_refit_early(step))) {
    HT_CHECK(models.size() == size_t(n_), "balancer: ", models.size(), " models for ", n_, " ranks");
    // A rank with no usable measurement yet (it only ever had b = 0) borrows the median slope of the others.
    std::vector<double> known;
    for (const auto& m : models)
      if (m.beta > 0 && std::isfinite(m.beta)) known.push_back(m.beta);
    std::sort(known.begin(), known.end());
    double median = known.empty() ? 1.0 : known[known.size() / 2];
    models_ = models;
    idle_fits_.resize(n_, 0);
    for (int r = 0; r < n_; ++r) {
      CostModel& m = models_[r];
      if (!(m.beta > 0 && std::isfinite(m.beta))) m = {0.0, median};
      if (!(m.alpha >= 0 && std::isfinite(m.alpha))) m.alpha = 0.0;
      // A rank at b = 0 is never measured again, so one noisy fit (an inflated fixed cost α) would exclude
      // it for good. Its α is trusted less at every refit it sits out (halved each time), so it is tried
      // again; if the cost is real, the next measurement excludes it again.
      idle_fits_[r] = split_[r] == 0 ? idle_fits_[r] + 1 : 0;
      m.alpha = std::ldexp(m.alpha, -idle_fits_[r]);
    }
    ++fits_;
    std::vector<int64_t> candidate = solve_split(models_, caps_, B_);
    // The first fit is judged against the uniform plan (calibration's perturbed split is no baseline).
    const bool first = step == 2 * config_.calibration_steps - 1;
    const std::vector<int64_t>& reference = first ? uniform_ : split_;
    double t_ref = predicted_step_seconds(models_, reference);
    double t_new = predicted_step_seconds(models_, candidate);
    bool better = t_ref > 0 && (t_ref - t_new) > config_.hysteresis * t_ref;
    split_ = better ? candidate : reference;
  }
  const bool changed = split_ != before;
  rebalances_ += changed;
  return changed;
}

std::vector<double> BalancePlanner::speeds() const {
  std::vector<double> s;
  if (models_.empty()) return s;
  for (int r = 0; r < n_; ++r) {
    const CostModel& m = models_[r];
    double t = m.predict(split_[r]);
    s.push_back(split_[r] > 0 ? (t > 0 ? double(split_[r]) / t : 0.0) : (m.beta > 0 ? 1.0 / m.beta : 0.0));
  }
  return s;
}

double BalancePlanner::predicted_seconds() const {
  return models_.empty() ? 0.0 : predicted_step_seconds(models_, split_);
}

double BalancePlanner::predicted_uniform_seconds() const {
  return models_.empty() ? 0.0 : predicted_step_seconds(models_, uniform_);
}

std::string BalancePlanner::describe(int64_t step) const {
  std::ostringstream os;
  os << "balance (" << balance_mode_name(config_.mode) << ") after step " << step << ": split [";
  for (int r = 0; r < n_; ++r) os << (r ? ", " : "") << split_[r];
  os << "]";
  if (!models_.empty()) {
    double t = predicted_seconds(), u = predicted_uniform_seconds();
    char buf[160];
    std::snprintf(buf, sizeof buf, " samples/s, predicted %.3f ms/step (uniform %.3f ms, %.2fx)", 1e3 * t, 1e3 * u,
                  t > 0 ? u / t : 0.0);
    os << " speeds " << join(speeds(), "%.1f") << buf;
  } else {
    os << " (calibrating)";
  }
  return os.str();
}

}  // namespace hetrain::dist
