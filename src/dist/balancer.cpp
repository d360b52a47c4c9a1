// Balancer: local cost window + the planner; one allgather of (α, β) per refit.
#include "hetrain/dist/balancer.hpp"

#include <algorithm>

#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
int comm_size(MPI_Comm comm) {
  int n = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &n));
  return n;
}
int window_of(const BalanceConfig& c) {
  return c.window > 0 ? c.window : int(std::min<int64_t>(2 * c.rebalance_every, 1 << 20));
}
}  // namespace

Balancer::Balancer(MPI_Comm comm, int64_t B, const BalanceConfig& config)
    : comm_(comm),
      planner_(comm_size(comm), B, config),
      window_(window_of(config) >= 1 ? window_of(config) : 1, config.decay) {
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
}

int64_t Balancer::local_offset() const {
  int64_t off = 0;
  for (int q = 0; q < rank_; ++q) off += planner_.split()[q];
  return off;
}

void Balancer::record(int64_t b, double compute_seconds) { window_.add(b, compute_seconds); }

bool Balancer::off_model(int64_t step) const {
  return have_mine_ && planner_.may_refit_early(step) && step - last_early_ >= kCooldown &&
         window_.steps_off(mine_) > 0;
}

bool Balancer::update(int64_t step, bool early) {
  early = early && planner_.may_refit_early(step) && !planner_.needs_models(step);
  if (!planner_.needs_models(step) && !early) return planner_.advance(step, {});
  if (early) {
    last_early_ = step;
    // The rank(s) whose speed changed fit the new regime from its off steps alone, and later fits never
    // mix in the old regime's steps; the others keep their windows.
    if (const size_t run = have_mine_ ? window_.steps_off(mine_) : 0; run > 0) window_.keep_newest(run);
  }
  CostModel fitted = window_.fit(have_mine_ ? &mine_ : nullptr);
  if (fitted.beta > 0) mine_ = fitted, have_mine_ = true;
  const int n = planner_.size();
  double mine[2] = {fitted.alpha, fitted.beta};
  std::vector<double> all(2 * size_t(n));
  HT_MPI_CHECK(MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, comm_));
  std::vector<CostModel> models(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) models[r] = {all[2 * r], all[2 * r + 1]};
  const std::vector<int64_t> before = planner_.split();
  planner_.advance(step, models, early);
  // Every rank solved the same problem with the same code; rank 0's answer is final all the same, so one
  // plan holds even if some rank's floating point were to differ.
  std::vector<int64_t> agreed = planner_.split();
  HT_MPI_CHECK(MPI_Bcast(agreed.data(), n, MPI_INT64_T, 0, comm_));
  if (agreed != planner_.split()) planner_.set_split(agreed);
  return planner_.split() != before;
}

}  // namespace hetrain::dist
