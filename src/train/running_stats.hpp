// Batch-norm running statistics across replicas: one rule for every mode (docs/architecture.md, "Training
// loop"). Each replica's statistics follow the batches it trained on, so they differ between ranks; before
// a validation, a checkpoint or the end of the run they are averaged into one set, identical everywhere.
//
// The rule: replica r weighs n_r / Σ n_q, where n_r is the number of samples of r's last step. Running
// statistics are an exponential average over a replica's recent batches, so what stands behind them is
// the size of those batches; a replica whose last step had no samples (b_r = 0, or no step yet) adds
// nothing, where a plain mean would mix in its stale or initial statistics. In the synchronous mode n_r is
// b_r of the last step, so the average is the one a single process at batch B would have come closest to.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "hetrain/dist.hpp"
#include "hetrain/nn.hpp"

namespace hetrain::train {

// n_r / Σ n_q; 0 when no replica trained a sample (the statistics are then left as they are).
double running_stats_weight(int64_t mine, int64_t total);

// Collective over `world` (every rank of the job) and `comm` (the same ranks): replaces this rank's
// running statistics by the weighted average. `last_step_samples` is n_r. With `check`
// (--debug-consistency) compares the result across the ranks. With `meet` (the world's StepArrival, the
// idle hook of `comm` its keep_alive) the ranks first meet there, bounded, at `step`: a rank stopped before
// or inside the average is named instead of leaving the others blocked in it.
void average_running_stats(dist::Communicator& comm, MPI_Comm world, nn::ParamBuffer& params,
                           int64_t last_step_samples, bool check, dist::StepArrival* meet = nullptr,
                           int64_t step = 0);

}  // namespace hetrain::train
