// One rank's side of the balancer without MPI: its window, its early-refit vote, its model at a refit.
#include <algorithm>

#include "hetrain/dist/balance.hpp"

namespace hetrain::dist {
namespace {
int window_of(const BalanceConfig& c) {
  const int64_t w = c.window > 0 ? c.window : 2 * c.rebalance_every;
  return int(std::max<int64_t>(1, std::min<int64_t>(w, 1 << 20)));
}
}  // namespace

RankBalance::RankBalance(const BalanceConfig& config) : window_(window_of(config), config.decay) {}

void RankBalance::record(int64_t b, double seconds) { window_.add(b, seconds); }

int RankBalance::vote(const BalancePlanner& planner, int64_t step) const {
  if (!have_mine_ || !planner.may_refit_early(step) || step - last_early_ < kCooldown) return 0;
  const double ratio = window_.newest_ratio(mine_);
  const int sign = ratio > 1.0 ? 1 : -1;
  if (window_.steps_off(mine_) > 0) return 2 * sign;
  return (ratio > kLeanRatio || ratio < 1.0 / kLeanRatio) ? sign : 0;
}

CostModel RankBalance::refit(int64_t step, bool early) {
  if (early) {
    last_early_ = step;
    if (const size_t run = have_mine_ ? window_.steps_off(mine_) : 0; run > 0) window_.keep_newest(run);
  }
  CostModel fitted = window_.fit(have_mine_ ? &mine_ : nullptr);
  if (fitted.beta > 0) mine_ = fitted, have_mine_ = true;
  return fitted;
}

void RefitVotes::add(int vote) {
  slower += vote >= 2, faster += vote <= -2;
  leaning_slower += vote > 0, leaning_faster += vote < 0;
}

void RefitVotes::append_to(std::vector<double>& values) const {
  values.insert(values.end(), {double(slower), double(faster), double(leaning_slower), double(leaning_faster)});
}

RefitVotes RefitVotes::read(const std::vector<double>& values, size_t at) {
  return RefitVotes{int64_t(values.at(at)), int64_t(values.at(at + 1)), int64_t(values.at(at + 2)),
                    int64_t(values.at(at + 3))};
}

bool early_refit_agreed(const RefitVotes& v, int n) {
  const bool common_slow = n > 1 && v.leaning_slower == n, common_fast = n > 1 && v.leaning_faster == n;
  return (v.slower > 0 && !common_slow) || (v.faster > 0 && !common_fast);
}

}  // namespace hetrain::dist
