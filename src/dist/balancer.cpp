// Balancer: this rank's RankBalance + the planner; one allgather of the fitted models per refit.
#include "hetrain/dist/balancer.hpp"

#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
int comm_size(MPI_Comm comm) {
  int n = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &n));
  return n;
}
}  // namespace

Balancer::Balancer(MPI_Comm comm, int64_t B, const BalanceConfig& config)
    : comm_(comm), planner_(comm_size(comm), B, config), rank_balance_(config) {
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
}

int64_t Balancer::local_offset() const {
  int64_t off = 0;
  for (int q = 0; q < rank_; ++q) off += planner_.split()[q];
  return off;
}

void Balancer::record(int64_t b, double compute_seconds) { rank_balance_.record(b, compute_seconds); }

bool Balancer::update(int64_t step, bool early) {
  early = early && planner_.may_refit_early(step) && !planner_.needs_models(step);
  if (!planner_.needs_models(step) && !early) return planner_.advance(step, {});
  const CostModel fitted = rank_balance_.refit(step, early);
  const int n = planner_.size();
  constexpr int kFields = 4;  // α, β and how far to trust them (spread, steps)
  double mine[kFields] = {fitted.alpha, fitted.beta, fitted.spread, fitted.steps};
  std::vector<double> all(kFields * size_t(n));
  HT_MPI_CHECK(MPI_Allgather(mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, comm_));
  std::vector<CostModel> models(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const double* m = &all[kFields * size_t(r)];
    models[r] = {m[0], m[1], m[2], m[3]};
  }
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
