#include "train/batch_stats.hpp"

#include <algorithm>
#include <chrono>

#include "hetrain/dist/emulate.hpp"
#include "hetrain/error.hpp"
#include "ops/batchnorm/batchnorm.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

BatchStatsExchange::BatchStatsExchange(MPI_Comm comm) { HT_MPI_CHECK(MPI_Comm_dup(comm, &comm_)); }

BatchStatsExchange::~BatchStatsExchange() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void BatchStatsExchange::sum(double* values, int n, const char* at) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = dist::SpeedEmulator::thread_cpu_seconds();
  if (arrival_) {
    meeting_.assign(values, values + n);
    arrival_->meet(step_, meeting_, at);
    std::copy(meeting_.begin(), meeting_.end(), values);
  } else {
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, comm_));
  }
  spent_.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spent_.cpu += dist::SpeedEmulator::thread_cpu_seconds() - cpu_start;
}

BatchStatsExchange::Spent BatchStatsExchange::take_spent() {
  const Spent spent = spent_;
  spent_ = Spent();
  return spent;
}

std::unique_ptr<nn::BatchNormMode> choose_batch_norm(const TrainConfig& cfg, const Setup& s) {
  auto mode = std::make_unique<nn::BatchNormMode>(nn::parse_batch_norm_mode(cfg.batch_norm));
  if (mode->kind == nn::BatchNormMode::Kind::Sync)
    HT_CHECK(s.device_kind != Device::CUDA || ops::batchnorm_stat_sums_impl.has(Device::CUDA),
             "--bn sync: this rank computes on ", s.device,
             ", and this build has no implementation of synchronised batch norm there: use --bn ghost:G or --bn local");
  return mode;
}

void check_ghost_split(const nn::BatchNormMode& mode, const std::vector<int64_t>& split, const std::string& option) {
  if (mode.kind != nn::BatchNormMode::Kind::Ghost) return;
  for (size_t r = 0; r < split.size(); ++r)
    HT_CHECK(split[r] % mode.ghost_group == 0, "--split gives rank ", r, " ", split[r],
             " samples, not a multiple of the ghost batch-norm group ", mode.ghost_group, " (--bn ", option, ")");
}

void connect_shared_batch(Setup& s, MPI_Comm comm) {
  nn::BatchNormMode& mode = *s.batch_norm;
  const bool sync = mode.kind == nn::BatchNormMode::Kind::Sync;
  int size = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size > 1 && (sync || s.detection)) s.batch_exchange = std::make_unique<BatchStatsExchange>(comm);
  if (sync) {
    BatchStatsExchange* exchange = s.batch_exchange.get();
    if (exchange)
      mode.sum_over_ranks = [exchange](double* values, int n) { exchange->sum(values, n); };
    else
      mode.sum_over_ranks = [](double*, int) {};  // one rank: its own sums are the batch's
  }
  s.model->set_batch_norm(s.batch_norm.get());
}

void set_batch_norm_step(Setup& s, int64_t samples, double gradient_weight) {
  s.batch_norm->no_samples = samples == 0;
  s.batch_norm->gradient_weight = gradient_weight;
}

}  // namespace hetrain::train
