#include "train/running_stats.hpp"

#include <vector>

#include "hetrain/error.hpp"

namespace hetrain::train {

double running_stats_weight(int64_t mine, int64_t total) {
  return total > 0 ? double(mine) / double(total) : 0.0;
}

void average_running_stats(dist::Communicator& comm, MPI_Comm world, nn::ParamBuffer& params,
                           int64_t last_step_samples, bool check, dist::StepArrival* meet, int64_t step) {
  if (params.state_count() == 0) return;  // the same model everywhere: every rank returns here alike
  int64_t total = last_step_samples;
  if (meet) {  // sample counts: exact in doubles
    std::vector<double> sum = {double(total)};
    // Twice the timeout, as the checkpoint's own meeting: a rank that left the step's reduction early
    // waits here while the step's watcher names a rank stopped inside it, and must not speak first.
    meet->arrive(step, sum, "the batch-norm statistics' average", 2);
    total = int64_t(sum[0]);
  } else {
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, world));
  }
  if (total == 0) return;  // no step trained in this process: the statistics are the identical ones it began with
  comm.weighted_allreduce(params.states().data(), params.state_count(), running_stats_weight(last_step_samples, total));
  if (!check) return;
  const Tensor states = params.states().to(Device::CPU);
  dist::check_identical(world, states.data(), params.state_count(), "batch-norm running statistics");
}

}  // namespace hetrain::train
