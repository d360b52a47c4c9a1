// hetrain/dist/balancer.hpp — the per-rank load balancer: local measurements + one small allgather.
//
// Every rank calls record() and update() once per step, in the same order. update() returns true when the
// split of the next step changed; all ranks always hold the same split (each computes it from the same
// allgathered models, and rank 0's result is broadcast as a safeguard).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/dist/balance.hpp"

namespace hetrain::dist {

class Balancer {
 public:
  // Validates (caps, B ≥ 1, K ≥ 1, ...) without communicating; throws hetrain::Error naming the option.
  Balancer(MPI_Comm comm, int64_t B, const BalanceConfig& config);

  const std::vector<int64_t>& split() const { return planner_.split(); }
  int64_t local_batch() const { return planner_.split()[rank_]; }
  // Offset of this rank's slice inside the step's B samples: Σ_{q<r} b_q.
  int64_t local_offset() const;
  // After each step: this rank's b and its compute seconds (forward+backward+emulated sleep; no data
  // waiting, no communication). Local only.
  void record(int64_t b, double compute_seconds);
  // Local: this rank's early-refit vote after `step` (RankBalance::vote). The
  // trainer sums the votes over the ranks (RefitVotes) in the step's agreement and asks
  // early_refit_agreed(); update(step, true) on every rank then refits at once.
  int vote(int64_t step) const { return rank_balance_.vote(planner_, step); }
  // After each step, on every rank. Collective only at the planner's deterministic steps, and when
  // `early` (the same on every rank) asks for a refit now.
  bool update(int64_t step, bool early = false);

  const BalancePlanner& planner() const { return planner_; }
  std::vector<double> speeds() const { return planner_.speeds(); }
  double predicted_seconds() const { return planner_.predicted_seconds(); }
  double predicted_uniform_seconds() const { return planner_.predicted_uniform_seconds(); }
  std::string describe(int64_t step) const { return planner_.describe(step); }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  BalancePlanner planner_;
  RankBalance rank_balance_;
};

}  // namespace hetrain::dist
