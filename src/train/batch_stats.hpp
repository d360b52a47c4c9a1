// --bn: where batch norm takes its statistics in training (nn::BatchNormMode; docs/architecture.md,
// "Batch norm"). The mode's choice, its checks against the job, and the exchange of the sums that couple
// the ranks sharing a batch: --bn sync's statistics and a detector's match counts (docs/detection.md).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "hetrain/dist/arrival.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/train.hpp"

namespace hetrain::train {

struct Setup;

// Sums over the ranks that share a global batch (all ranks in sync mode, a hybrid group's members): --bn
// sync's per-channel sums in every batch-norm layer and a detector's match counts, on a communicator of its
// own, so its blocking sums never meet the gradient reduction's requests. It keeps the time spent in it: waiting there for a
// slower rank is no compute, and the balancer measures compute.
class BatchStatsExchange {
 public:
  explicit BatchStatsExchange(MPI_Comm comm);  // collective over comm (duplicates it)
  ~BatchStatsExchange();
  BatchStatsExchange(const BatchStatsExchange&) = delete;
  BatchStatsExchange& operator=(const BatchStatsExchange&) = delete;
  // Collective over the ranks that share the batch. `at` names this meeting in a stall's line.
  void sum(double* values, int n, const char* at = "the batch-norm statistics");
  // From now on each sum is a meeting of `arrival` (its communicator: the same ranks) at `step`, bounded
  // like the step's own: a rank that does not come within --stall-timeout is named, instead of the others
  // blocking where nobody can tell who is missing (hetrain/dist/arrival.hpp). Null: plain sums.
  void bound_by(dist::StepArrival* arrival, int64_t step) { arrival_ = arrival, step_ = step; }
  struct Spent {
    double wall = 0;  // seconds in sum()
    double cpu = 0;   // this thread's CPU seconds in sum() (MPI polls while it waits)
  };
  Spent take_spent();  // since the last call; the counters restart at zero

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  dist::StepArrival* arrival_ = nullptr;
  int64_t step_ = 0;
  std::vector<double> meeting_;  // a bounded sum's values
  Spent spent_;
};

// Parses --bn and checks it against this rank's device (one line naming --bn on error): sync needs its
// ops on the rank's device (a build without CUDA has no GPU ranks; the check names the gap should one
// appear). Rank-local.
std::unique_ptr<nn::BatchNormMode> choose_batch_norm(const TrainConfig& cfg, const Setup& s);
// ghost:G: every share of a fixed --split must be a multiple of G (`option`: --bn's text, for the message).
void check_ghost_split(const nn::BatchNormMode& mode, const std::vector<int64_t>& split, const std::string& option);

// Collective over `comm` (the ranks that share a global batch): with more than one rank and --bn sync or a
// detector, builds s.batch_exchange over it; connects --bn sync's sums to it (one rank: its own sums are
// the batch's). Then hands the mode to the model.
void connect_shared_batch(Setup& s, MPI_Comm comm);

// Before each training step, on every rank that shares the batch: whether this rank has samples, and its
// factor in the gradient reduction (sync's backward needs both).
void set_batch_norm_step(Setup& s, int64_t samples, double gradient_weight);

}  // namespace hetrain::train
