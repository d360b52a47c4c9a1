// The split solver: minimise the predicted step time max_r t_r(b_r) over integer splits of B.
#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
// Continuous batch rank r can take within time T (the water level).
double fill(const CostModel& m, int64_t cap, double T) {
  if (cap <= 0 || T < m.alpha) return 0.0;
  if (m.beta <= 0) return double(cap);
  return std::min(double(cap), (T - m.alpha) / m.beta);
}

// Lowest rank with the largest predicted time (b > 0), or -1 when every rank is idle.
int slowest(const std::vector<CostModel>& models, const std::vector<int64_t>& b) {
  int r = -1;
  double worst = -1;
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] > 0 && models[i].predict(b[i]) > worst) worst = models[i].predict(b[i]), r = int(i);
  return r;
}

// Rank (≠ skip) whose time after taking one more sample is smallest; ties to the lower rank; -1 if none.
int cheapest_next(const std::vector<CostModel>& models, const std::vector<int64_t>& b,
                  const std::vector<int64_t>& cap, int skip) {
  int q = -1;
  double best = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (int(i) == skip || b[i] >= cap[i]) continue;
    double t = models[i].predict(b[i] + 1);
    if (q < 0 || t < best) best = t, q = int(i);
  }
  return q;
}
}  // namespace

double predicted_step_seconds(const std::vector<CostModel>& models, const std::vector<int64_t>& split) {
  HT_CHECK(models.size() == split.size(), "predicted_step_seconds: ", models.size(), " models for ", split.size(),
           " ranks");
  double worst = 0;
  for (size_t r = 0; r < split.size(); ++r) worst = std::max(worst, models[r].predict(split[r]));
  return worst;
}

std::vector<int64_t> solve_split(const std::vector<CostModel>& models, const std::vector<int64_t>& caps, int64_t B) {
  const size_t n = models.size();
  HT_CHECK(n >= 1, "solve_split: no ranks");
  HT_CHECK(caps.empty() || caps.size() == n, "solve_split: ", caps.size(), " caps for ", n, " ranks");
  HT_CHECK(B >= 0, "solve_split: negative global batch ", B);
  std::vector<int64_t> cap(n);
  int64_t room = 0;
  for (size_t r = 0; r < n; ++r) {
    int64_t c = caps.empty() ? B : caps[r];
    HT_CHECK(c >= 0, "solve_split: negative cap ", c, " for rank ", r);
    cap[r] = std::min(c, B);
    room += cap[r];
    const CostModel& m = models[r];
    HT_CHECK(std::isfinite(m.alpha) && std::isfinite(m.beta) && m.alpha >= 0 && m.beta >= 0,
             "solve_split: invalid cost model for rank ", r, " (alpha ", m.alpha, ", beta ", m.beta, ")");
  }
  HT_CHECK(room >= B, "local batch caps sum to ", room, " < global batch ", B,
           ": raise --max-local-batch or lower the global batch");

  // Water filling: the smallest level T whose continuous fills hold B samples.
  double lo = 0, hi = 0;
  for (size_t r = 0; r < n; ++r) hi = std::max(hi, models[r].predict(cap[r]));
  auto total = [&](double T) {
    double s = 0;
    for (size_t r = 0; r < n; ++r) s += fill(models[r], cap[r], T);
    return s;
  };
  for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; ++it) {
    double mid = 0.5 * (lo + hi);
    (total(mid) >= double(B) ? hi : lo) = mid;
  }

  // Largest remainder rounding of the fills at level hi (Σ ≥ B).
  std::vector<double> fills(n);
  for (size_t r = 0; r < n; ++r) fills[r] = fill(models[r], cap[r], hi);
  std::vector<int64_t> b = round_largest_remainder(fills, B, cap);
  int64_t sum = std::accumulate(b.begin(), b.end(), int64_t(0));
  // Whatever rounding left over (flat models can overshoot): add where cheapest, remove where slowest.
  while (sum < B) {
    int q = cheapest_next(models, b, cap, -1);
    ++b[q], ++sum;
  }
  while (sum > B) {
    int r = slowest(models, b);
    --b[r], --sum;
  }

  // Greedy fix-up: move one sample off the slowest rank while that lowers (max time, ranks at the max).
  // When no move helps, every other rank would reach the max with one more sample: the split is optimal.
  for (int64_t guard = 0; guard < 4 * (B + int64_t(n)) + 16; ++guard) {
    int r = slowest(models, b);
    if (r < 0) break;
    int q = cheapest_next(models, b, cap, r);
    if (q < 0 || !(models[q].predict(b[q] + 1) < models[r].predict(b[r]))) break;
    --b[r], ++b[q];
  }
  return b;
}

std::vector<int64_t> round_largest_remainder(const std::vector<double>& exact, int64_t total,
                                             const std::vector<int64_t>& caps) {
  const size_t n = exact.size();
  HT_CHECK(caps.empty() || caps.size() == n, "round_largest_remainder: ", caps.size(), " caps for ", n, " shares");
  auto cap = [&](size_t r) { return caps.empty() ? INT64_MAX : caps[r]; };
  std::vector<int64_t> b(n);
  std::vector<size_t> order(n);
  int64_t sum = 0;
  for (size_t r = 0; r < n; ++r) {
    HT_CHECK(std::isfinite(exact[r]) && exact[r] >= 0, "round_largest_remainder: share ", r, " is ", exact[r]);
    b[r] = std::min(cap(r), int64_t(std::floor(exact[r])));
    sum += b[r];
    order[r] = r;
  }
  auto frac = [&](size_t r) { return exact[r] - std::floor(exact[r]); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return frac(a) > frac(c); });
  for (bool room = true; sum < total && room;) {
    room = false;
    for (size_t i = 0; i < n && sum < total; ++i)
      if (b[order[i]] < cap(order[i])) ++b[order[i]], ++sum, room = true;
  }
  return b;
}

std::vector<int64_t> uniform_split(int n, int64_t B, const std::vector<int64_t>& caps) {
  HT_CHECK(n >= 1 && B >= 0, "uniform_split: bad arguments n=", n, " B=", B);
  std::vector<int64_t> b(size_t(n), B / n);
  for (int r = 0; r < B % n; ++r) ++b[r];
  bool fits = caps.empty();
  if (!fits) {
    HT_CHECK(caps.size() == size_t(n), "uniform_split: ", caps.size(), " caps for ", n, " ranks");
    fits = true;
    for (int r = 0; r < n; ++r) fits = fits && b[r] <= caps[r];
  }
  if (fits) return b;
  return solve_split(std::vector<CostModel>(size_t(n), CostModel{0.0, 1.0}), caps, B);  // equal speeds, capped
}

std::vector<int64_t> respect_min_share(std::vector<int64_t> split, int64_t min_share) {
  for (size_t r = 0; r < split.size(); ++r) {
    if (split[r] == 0 || split[r] >= min_share) continue;
    size_t donor = r;  // the largest other share (the first of equals)
    for (size_t q = 0; q < split.size(); ++q)
      if (q != r && (donor == r || split[q] > split[donor])) donor = q;
    if (donor == r) break;  // one rank
    const int64_t need = min_share - split[r];
    if (split[donor] - need >= min_share) {
      split[donor] -= need, split[r] = min_share;
    } else {
      split[donor] += split[r], split[r] = 0;
    }
  }
  return split;
}

}  // namespace hetrain::dist
