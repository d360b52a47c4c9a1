// Per-rank cost model t(b) = α + β·b: weighted least squares over a window of recent steps.
#include <algorithm>
#include <cmath>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
// A spread of b below 2% of its mean cannot separate slope from intercept under realistic noise.
constexpr double kMinRelativeSpread = 0.02;

// Same shape as `previous` (its α/β ratio), level refitted to the mean; or proportional without one.
CostModel rescale(const CostModel* previous, double mean_b, double mean_t) {
  if (previous && previous->beta > 0.0) {
    double at_mean = previous->alpha + previous->beta * mean_b;
    double s = at_mean > 0.0 ? mean_t / at_mean : 1.0;
    return {s * previous->alpha, s * previous->beta};
  }
  return {0.0, mean_t / mean_b};
}
constexpr double kMaxFixedShare = 0.5;  // α ≤ this × the mean step time of the samples
}  // namespace

CostModel fit_cost_model(const std::vector<CostSample>& samples, const std::vector<double>& weights,
                         const CostModel* previous) {
  HT_CHECK(samples.size() == weights.size(), "fit_cost_model: ", samples.size(), " samples but ", weights.size(),
           " weights");
  double W = 0, sb = 0, st = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].b <= 0 || !(weights[i] > 0)) continue;  // b = 0: no forward/backward, no information
    W += weights[i];
    sb += weights[i] * double(samples[i].b);
    st += weights[i] * samples[i].seconds;
  }
  if (W <= 0) return previous ? *previous : CostModel{};
  const double mb = sb / W, mt = st / W;
  double vb = 0, cbt = 0, sbb = 0, sbt = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].b <= 0 || !(weights[i] > 0)) continue;
    const double w = weights[i], b = double(samples[i].b), t = samples[i].seconds;
    vb += w * (b - mb) * (b - mb);
    cbt += w * (b - mb) * (t - mt);
    sbb += w * b * b;
    sbt += w * b * t;
  }
  vb /= W;
  cbt /= W;
  if (std::sqrt(vb) < kMinRelativeSpread * mb) return rescale(previous, mb, mt);
  double beta = cbt / vb;
  double alpha = mt - beta * mb;
  if (!(beta > 0)) return rescale(previous, mb, mt);  // noise made the slope non-positive
  if (alpha < 0) return {0.0, sbt / sbb};              // clamp: least squares through the origin
  // Two nearby batch sizes and noisy timings can put almost all of the time into α (β → 0): the rank
  // would look infinitely fast per sample. A step's fixed cost above half its time at the batch sizes seen
  // is not credible for training compute; cap it there, through the weighted mean point.
  if (alpha > kMaxFixedShare * mt) {
    alpha = kMaxFixedShare * mt;
    beta = (mt - alpha) / mb;
  }
  return {alpha, beta};
}

CostWindow::CostWindow(int capacity, double decay) : capacity_(capacity), decay_(decay) {
  HT_CHECK(capacity >= 1, "cost window capacity must be >= 1, got ", capacity);
  HT_CHECK(decay > 0 && decay <= 1, "cost window decay must be in (0, 1], got ", decay);
}

void CostWindow::add(int64_t b, double seconds) {
  HT_CHECK(b >= 0, "balancer: negative local batch ", b);
  HT_CHECK(std::isfinite(seconds) && seconds >= 0, "balancer: compute time must be finite and >= 0, got ", seconds);
  samples_.push_back({b, seconds});
  while (int64_t(samples_.size()) > capacity_) samples_.pop_front();
}

// Index of the first sample of a regime change: the longest run of newest samples (at least
// kMinShiftRun) that all miss `previous` by more than kShiftRatio in the same direction (a GPU started
// throttling, another job arrived). 0 when there is none.
static size_t shift_start(const std::deque<CostSample>& samples, const CostModel& previous, size_t min_run) {
  constexpr double kShiftRatio = CostWindow::kShiftRatio;
  int direction = 0;
  size_t start = samples.size();
  while (start > 0) {
    const CostSample& c = samples[start - 1];
    const double predicted = previous.predict(c.b);
    if (c.b <= 0 || predicted <= 0) break;
    const double ratio = c.seconds / predicted;
    const int d = ratio > kShiftRatio ? 1 : ratio < 1.0 / kShiftRatio ? -1 : 0;
    if (d == 0 || (direction != 0 && d != direction)) break;
    direction = d;
    --start;
  }
  return samples.size() - start >= min_run ? start : 0;
}

bool CostWindow::newest_off(const CostModel& model, size_t run, double off_ratio) const {
  if (run == 0 || samples_.size() < run) return false;
  int direction = 0;
  for (size_t i = samples_.size() - run; i < samples_.size(); ++i) {
    const double predicted = model.predict(samples_[i].b);
    if (samples_[i].b <= 0 || predicted <= 0) return false;
    const double ratio = samples_[i].seconds / predicted;
    const int d = ratio > off_ratio ? 1 : ratio < 1.0 / off_ratio ? -1 : 0;
    if (d == 0 || (direction != 0 && d != direction)) return false;
    direction = d;
  }
  return true;
}

size_t CostWindow::steps_off(const CostModel& model) const {
  if (newest_off(model, 2, 2.0)) return 2;
  if (newest_off(model, kSustainedRun, kShiftRatio)) return kSustainedRun;
  return 0;
}

double CostWindow::newest_ratio(const CostModel& model) const {
  if (samples_.empty()) return 1.0;
  const double predicted = model.predict(samples_.back().b);
  return predicted > 0 ? samples_.back().seconds / predicted : 1.0;
}

CostModel CostWindow::fit(const CostModel* previous) const {
  // After a regime change the older samples describe a machine that is gone: fit the new regime alone.
  const size_t first = previous ? shift_start(samples_, *previous, kMinShiftRun) : 0;
  std::vector<CostSample> s(samples_.begin() + first, samples_.end());
  std::vector<double> w(s.size());
  double weight = 1.0;
  for (size_t i = s.size(); i-- > 0;) {  // newest has age 0
    w[i] = weight;
    weight *= decay_;
  }
  CostModel model = fit_cost_model(s, w, previous);
  // A lone slow step (another job's burst on a shared node, a page-cache miss) pulls a least-squares fit
  // enough to move the plan past the hysteresis; with 2x hiccups one step in 40 the scheduled refits alone
  // changed the plan about every 20 steps (planner tests). Refit without the steps that miss the first fit
  // by more than kOutlierRatio, while they are a minority: a real change of speed is many steps, and the
  // regime-change rules above hand the fit only the new regime's steps.
  if (model.beta > 0) {
    size_t outliers = 0, used = 0;
    std::vector<double> kept = w;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].b <= 0) continue;
      ++used;
      const double predicted = model.predict(s[i].b), ratio = predicted > 0 ? s[i].seconds / predicted : 1.0;
      if (ratio > kOutlierRatio || ratio < 1.0 / kOutlierRatio) kept[i] = 0, ++outliers;
    }
    if (outliers > 0 && 2 * outliers < used) model = fit_cost_model(s, kept, previous), w = kept;
  }
  // How far to trust the fit: the spread of the steps it used around it, and how many steps that was.
  double W = 0, W2 = 0, sq = 0;
  size_t used = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double predicted = model.predict(s[i].b);
    if (s[i].b <= 0 || !(w[i] > 0) || !(predicted > 0)) continue;
    const double r = s[i].seconds / predicted - 1.0;
    W += w[i], W2 += w[i] * w[i], sq += w[i] * r * r, ++used;
  }
  model.steps = W2 > 0 ? W * W / W2 : 0.0;
  model.spread = used >= 3 ? std::sqrt(sq / W) : previous ? previous->spread : 0.0;
  return model;
}

double CostModel::level_error() const {
  const double s = spread > 0 ? spread : kUnknownSpread;
  return s / std::sqrt(std::max(1.0, steps));
}

}  // namespace hetrain::dist
