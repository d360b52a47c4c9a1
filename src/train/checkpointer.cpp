#include "train/checkpointer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "hetrain/error.hpp"
#include "train/stop_signals.hpp"

namespace hetrain::train {

namespace {
using Clock = std::chrono::steady_clock;
std::vector<float> host_copy(const Tensor& t) {
  const Tensor h = t.to(Device::CPU);
  return std::vector<float>(h.data(), h.data() + h.numel());
}
}  // namespace

Checkpointer::Checkpointer(const TrainConfig& cfg, const dist::World& world, std::vector<std::string> prunable)
    : world_(world),
      dir_(cfg.checkpoint_dir),
      every_(cfg.checkpoint_every),
      minutes_(cfg.checkpoint_minutes),
      keep_(cfg.keep_checkpoints),
      quiet_(cfg.quiet),
      prunable_(std::move(prunable)),
      last_time_(Clock::now()) {}

bool Checkpointer::due_by_steps(int64_t steps_done) const {
  return enabled() && every_ > 0 && steps_done % every_ == 0;
}

bool Checkpointer::due_by_time() const {
  return enabled() && minutes_ > 0 &&
         std::chrono::duration<double>(Clock::now() - last_time_).count() >= 60.0 * minutes_;
}

void Checkpointer::write_file(const std::string& path, const CheckpointInfo& info, const nn::ParamBuffer& layout,
                              const CheckpointTensors& tensors) {
  try {
    write_checkpoint(path, info, layout, tensors);
  } catch (const Error& e) {
    const size_t earlier = list_checkpoints(dir_).size();
    HT_THROW("checkpoint at step ", info.global_step, ": ", e.message(),
             earlier == 0 ? " (no earlier checkpoint in " + dir_ + ")"
                          : " (the " + std::to_string(earlier) + " earlier checkpoint file(s) in " + dir_ +
                                " are as they were)");
  }
  prunable_.push_back(path);
  removed_ = prune_checkpoints(prunable_, keep_);
}

void Checkpointer::written(const std::string& path, int64_t step, Clock::time_point start) {
  last_step_ = step;
  last_time_ = Clock::now();
  const double took = std::chrono::duration<double>(last_time_ - start).count();
  seconds_ += took;
  const double grace = mpirun_kill_grace_seconds();
  if (world_.rank() == 0 && grace >= 0 && took > grace && !warned_slow_) {
    // A stop checkpoint takes about as long: mpirun's kill would come first (README, "Checkpoints").
    warned_slow_ = true;
    std::fprintf(stderr,
                 "warning: this checkpoint took %.1f s, and mpirun kills the ranks %g s after it gets a SIGTERM or "
                 "Ctrl-C (Open MPI's odls_base_sigkill_timeout): such a stop would lose its checkpoint. Stop this "
                 "job with SIGUSR1 to mpirun (kill -USR1 PID): mpirun passes it on and waits for the checkpoint\n",
                 took, grace);
    std::fflush(stderr);
  }
  if (world_.rank() == 0 && !quiet_) {
    struct stat st {};
    const double mb = ::stat(path.c_str(), &st) == 0 ? double(st.st_size) / 1e6 : 0.0;
    std::printf("checkpoint: %s (%.1f MB, %.2f s)\n", path.c_str(), mb, took);
    for (const std::string& f : removed_) std::printf("checkpoint: removed %s (--keep-checkpoints %d)\n", f.c_str(), keep_);
    std::fflush(stdout);
  }
}

namespace {
// Collective: every rank's `mine` (the same length everywhere) as the rows of one array on rank 0 (empty
// elsewhere), in pieces whose MPI counts fit an int.
std::vector<float> gather_rows(MPI_Comm comm, const std::vector<float>& mine) {
  int rank = 0, size = 1;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  const size_t n = mine.size();
  std::vector<float> rows(rank == 0 ? n * size_t(size) : 0), piece;
  const size_t chunk = std::max<size_t>(1, size_t(INT_MAX) / size_t(size));
  for (size_t off = 0; off < n; off += chunk) {
    const size_t c = std::min(chunk, n - off);
    if (rank == 0) piece.resize(c * size_t(size));
    HT_MPI_CHECK(MPI_Gather(mine.data() + off, int(c), MPI_FLOAT, piece.data(), int(c), MPI_FLOAT, 0, comm));
    if (rank == 0)
      for (int r = 0; r < size; ++r) std::copy_n(piece.data() + size_t(r) * c, c, rows.data() + size_t(r) * n + off);
  }
  return rows;
}
}  // namespace

std::string Checkpointer::write(const CheckpointInfo& info, const nn::ParamBuffer& params, optim::Sgd& sgd,
                                dist::StepArrival& meet, int64_t step, optim::WeightAverage* ema,
                                const dist::PowerSgd* powersgd) {
  const auto start = Clock::now();
  const std::string path = checkpoint_path(dir_, info.global_step);
  // Every rank's error feedback (dist/powersgd.hpp), a row per rank on rank 0.
  std::vector<float> owed;
  if (powersgd) owed = gather_rows(world_.comm(), powersgd->error());
  std::string problem;
  if (world_.rank() == 0)
    problem = dist::capture_problem([&] {
      CheckpointTensors t;
      t.values = host_copy(params.values());
      t.states = host_copy(params.states());
      t.momentum = host_copy(sgd.momentum_buffer());
      t.num_batches_tracked = info.global_step;
      if (ema) {
        t.ema_values = host_copy(ema->values());
        t.ema_states = host_copy(ema->states());
        t.ema_updates = ema->updates();
      }
      if (powersgd) {
        t.powersgd_error = std::move(owed);
        t.powersgd_rows = world_.size();
        t.powersgd_q = powersgd->q();
        t.powersgd_rank = powersgd->rank();
      }
      write_file(path, info, params, t);
    });
  // A write takes as long as it takes within twice the stall timeout: the others' wait is watched, so a
  // rank 0 stopped inside it is named, and so is another rank that stopped meanwhile.
  // The meeting's sum says whether the write failed: no unwatched collective follows it unless it did.
  std::vector<double> failed = {problem.empty() ? 0.0 : 1.0};
  meet.arrive(step, failed, "the checkpoint", 2);
  if (failed[0] > 0) dist::agree_problem(world_.comm(), problem);
  meet.step_done();
  written(path, info.global_step, start);
  return path;
}

std::string Checkpointer::write_alone(const CheckpointInfo& info, const nn::ParamBuffer& layout,
                                      const CheckpointTensors& tensors) {
  const auto start = Clock::now();
  const std::string path = checkpoint_path(dir_, info.global_step);
  write_file(path, info, layout, tensors);
  written(path, info.global_step, start);
  return path;
}

}  // namespace hetrain::train
