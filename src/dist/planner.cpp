// BalancePlanner: when to change the split (calibration, every K steps, hysteresis) — no MPI here.
// It plans in units of G samples (BalanceConfig::granularity); only its public face speaks in samples.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <utility>

#include "hetrain/dist/balance.hpp"
#include "dist/agreed.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

BalanceMode parse_balance_mode(const std::string& text) {
  if (text == "none") return BalanceMode::None;
  if (text == "static") return BalanceMode::Static;
  if (text == "dynamic") return BalanceMode::Dynamic;
  HT_AGREED_THROW("--balance: expected none, static or dynamic, got ", quoted(text));
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
// The caps in units of G samples (see BalancePlanner): a rank may hold only whole groups, so a cap of
// 10 samples with G = 4 holds 2 groups, 8 samples. Errors are agreed, like resolve_caps's: every rank
// checks the same configuration before the first collective.
std::vector<int64_t> caps_in_units(const BalanceConfig& c, int n, int64_t B) {
  std::vector<int64_t> caps = resolve_caps(c, n, B);
  const int64_t G = c.granularity;
  HT_AGREED_CHECK(G >= 1, "the ghost batch norm group must be >= 1 sample, got ", G, " (--bn ghost:", G, ")");
  HT_AGREED_CHECK(B % G == 0, "--global-batch ", B, " is not a multiple of the ghost batch norm group ", G,
                  " (--bn ghost:", G, ")");
  int64_t room = 0;
  for (int64_t& cap : caps) {
    if (cap != INT64_MAX) cap /= G;  // no cap stays no cap
    room = (cap >= INT64_MAX - room) ? INT64_MAX : room + cap;
  }
  HT_AGREED_CHECK(room >= B / G, "--max-local-batch: caps rounded down to whole ghost batch norm groups of ", G,
                  " samples (--bn ghost:", G, ") sum to ", room * G, " over ", n,
                  " ranks, less than the global batch ", B);
  return caps;
}

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

// The models every rank sent, made usable: a rank with no usable measurement yet (it only ever had b = 0)
// borrows the median slope of the others; a non-finite or negative α or trust field becomes 0.
std::vector<CostModel> usable_models(std::vector<CostModel> models) {
  std::vector<double> known;
  for (const auto& m : models)
    if (m.beta > 0 && std::isfinite(m.beta)) known.push_back(m.beta);
  std::sort(known.begin(), known.end());
  const double median = known.empty() ? 1.0 : known[known.size() / 2];
  for (CostModel& m : models) {
    if (!(m.beta > 0 && std::isfinite(m.beta))) m = {0.0, median};
    if (!(m.alpha >= 0 && std::isfinite(m.alpha))) m.alpha = 0.0;
    if (!(m.spread >= 0 && std::isfinite(m.spread))) m.spread = 0.0;
    if (!(m.steps >= 0 && std::isfinite(m.steps))) m.steps = 0.0;
  }
  return models;
}

// Cost per unit of G samples: the slope scales; the fixed part and how far to trust the fit (its relative
// spread, the steps behind it) do not, so the noise bound and the probe test read the same either way.
std::vector<CostModel> per_unit(std::vector<CostModel> models, int64_t G) {
  for (CostModel& m : models) m.beta *= double(G);
  return models;
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
    : n_(n), G_(config.granularity), units_(0), config_(config), unit_caps_(caps_in_units(config, n, B)) {
  units_ = B / G_;  // G_ ≥ 1 and divides B: caps_in_units checked both
  // From here on everything is in units; publish() translates the split for split().
  std::vector<int64_t> binding = unit_caps_;
  bool any = false;
  for (int64_t c : unit_caps_) any = any || c < units_;
  if (!any) binding.clear();  // no cap can bind: plain B/n with the remainder to the first ranks
  unit_uniform_ = uniform_split(n, units_, binding);
  unit_perturbed_ = config.mode == BalanceMode::None ? unit_uniform_ : perturbed_split(n, units_, binding);
  unit_caps_ = binding;
  unit_split_ = unit_uniform_;
  publish();
}

void BalancePlanner::publish() {
  split_.resize(unit_split_.size());
  for (size_t r = 0; r < unit_split_.size(); ++r) split_[r] = unit_split_[r] * G_;
}

std::string BalancePlanner::one_unit() const { return G_ == 1 ? "1 sample" : std::to_string(G_) + " samples"; }

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
  std::vector<int64_t> units(static_cast<size_t>(n_));
  int64_t sum = 0;
  for (int r = 0; r < n_; ++r) {
    HT_CHECK(split[r] % G_ == 0, "balancer: share ", split[r], " of rank ", r,
             " is not a multiple of the ghost batch norm group ", G_);
    units[r] = split[r] / G_;
    HT_CHECK(split[r] >= 0 && (unit_caps_.empty() || units[r] <= unit_caps_[r]), "balancer: share ", split[r],
             " of rank ", r, " outside [0, cap]");
    sum += split[r];
  }
  HT_CHECK(sum == global_batch(), "balancer: split sums to ", sum, ", global batch is ", global_batch());
  unit_split_ = units;
  publish();
}

bool BalancePlanner::advance(int64_t step, const std::vector<CostModel>& models, bool early) {
  if (config_.mode == BalanceMode::None) return false;
  const std::vector<int64_t> before = unit_split_;
  if (step == config_.calibration_steps - 1) unit_split_ = unit_perturbed_;  // calibration phase 2 starts
  if (needs_models(step) || (early && may_refit_early(step))) {
    HT_CHECK(models.size() == size_t(n_), "balancer: ", models.size(), " models for ", n_, " ranks");
    models_ = usable_models(models);  // per sample: what models() reports and checkpoints store
    unit_models_ = per_unit(models_, G_);
    ++fits_;
    // The first fit is judged against the uniform plan (calibration's perturbed split is no baseline).
    const bool first = step == 2 * config_.calibration_steps - 1;
    adopt(first ? unit_uniform_ : unit_split_, solve_split(unit_models_, unit_caps_, units_), first);
    give_probes();
  }
  publish();
  const bool changed = unit_split_ != before;
  rebalances_ += changed;
  return changed;
}

namespace {
// λ of the way from `from` to `to` (both Σ = B within caps), rounded by largest remainder: Σ stays B and
// every share stays between the two, so within the caps.
std::vector<int64_t> part_way(const std::vector<int64_t>& from, const std::vector<int64_t>& to, double lambda) {
  std::vector<double> exact(from.size());
  std::vector<int64_t> upper(from.size());
  for (size_t r = 0; r < from.size(); ++r) {
    exact[r] = double(from[r]) + lambda * double(to[r] - from[r]);
    upper[r] = std::max(from[r], to[r]);
  }
  return round_largest_remainder(exact, std::accumulate(from.begin(), from.end(), int64_t(0)), upper);
}
}  // namespace

void BalancePlanner::adopt(const std::vector<int64_t>& reference, const std::vector<int64_t>& candidate, bool first) {
  // The noise bound: what the largest fitting error among the ranks that matter could make a split look
  // better by. Fits of n ranks each off by a relative error e_r make the current split look slower by
  // about max e_r and a re-solved one by about mean e_r, and E[max] grows like √(2 ln n)·σ; z_n adds a
  // margin of one σ on top (docs/architecture.md, "Load balancing").
  double error = 0;
  for (int r = 0; r < n_; ++r)
    if (reference[r] > 0 || candidate[r] > 0) error = std::max(error, unit_models_[r].level_error());
  const double z = std::sqrt(2.0 * std::log(std::max(2.0, double(n_)))) + 1.0;
  noise_bound_ = std::max(config_.hysteresis, z * error);
  const double t_ref = predicted_step_seconds(unit_models_, reference);
  const double t_new = predicted_step_seconds(unit_models_, candidate);
  const double gain = t_ref > 0 ? (t_ref - t_new) / t_ref : 0.0;
  char why[160];
  // The first fit leaves the uniform split, which calibration did not measure as a plan; its noise
  // estimate rests on a handful of steps, so there a gain above the hysteresis alone moves half-way.
  const bool uncertain = gain < 2 * noise_bound_ && (gain > noise_bound_ || (first && gain > config_.hysteresis));
  if (!(gain > noise_bound_) && !uncertain) {
    unit_split_ = reference;
    std::snprintf(why, sizeof why, "kept: predicted gain %.1f%% is within the noise bound %.1f%%", 100 * gain,
                  100 * noise_bound_);
  } else if (uncertain) {
    // Real but uncertain: go half-way. Ranks that share a node or a core change each other's speed, so a
    // full jump to a split fitted at the old one can overshoot; half-way steps converge instead.
    std::vector<int64_t> half = part_way(reference, candidate, 0.5);
    const bool helps = predicted_step_seconds(unit_models_, half) < t_ref;
    unit_split_ = helps ? half : candidate;
    std::snprintf(why, sizeof why, "%s: predicted gain %.1f%%, under twice the noise bound %.1f%%",
                  helps ? "moved half-way" : "moved", 100 * gain, 100 * noise_bound_);
  } else {
    unit_split_ = candidate;
    std::snprintf(why, sizeof why, "moved: predicted gain %.1f%% beats the noise bound %.1f%%", 100 * gain,
                  100 * noise_bound_);
  }
  decision_ = why;
}

// In units: a probe share is one unit (G samples), the smallest share a rank can hold.
void BalancePlanner::give_probes() {
  idle_fits_.resize(size_t(n_), 0);
  probe_wait_.resize(size_t(n_), 2);
  idle_notes_.clear();
  std::vector<int64_t>& units = unit_split_;
  for (int r = 0; r < n_; ++r) {
    if (units[r] > 0 || (!unit_caps_.empty() && unit_caps_[r] <= 0)) {
      idle_fits_[r] = 0;
      continue;
    }
    const double T = predicted_step_seconds(unit_models_, units);
    const CostModel& m = unit_models_[r];
    // One unit costs no more than the step (with the fit's error as margin): a share of one unit is free,
    // and the rank is measured at every step.
    const bool free = m.predict(1) <= T * (1.0 + m.level_error());
    const bool probe_due = ++idle_fits_[r] >= probe_wait_[r];
    if (!free && !probe_due) {
      char note[240];
      const bool fixed = m.alpha > T;
      const std::string what = fixed ? "its fixed cost" : G_ == 1 ? "one sample's" : one_unit() + "'";
      std::snprintf(note, sizeof note, "; rank %d idle: %s %.2f ms alone exceeds the step (%.2f ms), probed again in %d refit%s",
                    r, what.c_str(), 1e3 * (fixed ? m.alpha : m.predict(1)), 1e3 * T, probe_wait_[r] - idle_fits_[r],
                    probe_wait_[r] - idle_fits_[r] == 1 ? "" : "s");
      idle_notes_ += note;
      continue;
    }
    probe_wait_[r] = free ? 2 : std::min(2 * probe_wait_[r], kMaxProbeWait);
    idle_fits_[r] = 0;
    ++probes_;
    // The unit comes from the rank whose predicted time is largest (among those with more than one).
    int donor = -1;
    for (int q = 0; q < n_; ++q)
      if (units[q] > 1 && (donor < 0 || unit_models_[q].predict(units[q]) > unit_models_[donor].predict(units[donor])))
        donor = q;
    if (donor < 0) continue;
    --units[donor], ++units[r];
    if (!free) {
      char note[200];
      std::snprintf(note, sizeof note, "; rank %d probed with %s (its fit says %.2f ms for it, the step %.2f ms)", r,
                    one_unit().c_str(), 1e3 * m.predict(1), 1e3 * T);
      idle_notes_ += note;
    }
  }
}

// In samples: per-sample models at the shares in samples.
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
  return unit_models_.empty() ? 0.0 : predicted_step_seconds(unit_models_, unit_split_);
}

double BalancePlanner::predicted_uniform_seconds() const {
  return unit_models_.empty() ? 0.0 : predicted_step_seconds(unit_models_, unit_uniform_);
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
    os << " speeds " << join(speeds(), "%.1f") << buf << "; " << decision_ << idle_notes_;
  } else {
    os << " (calibrating)";
  }
  return os.str();
}

}  // namespace hetrain::dist
