#include "train/shared_step.hpp"

#include <limits>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "ops/conv2d/conv2d.hpp"

namespace hetrain::train {

// Samples go through the model this many at a time when validating.
constexpr int64_t kValidationChunk = 256;

uint64_t augmentation_seed(uint64_t seed, int64_t epoch) {
  return seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch) * 1000003ull;
}

BetweenLayersHook::BetweenLayersHook(std::function<void()> hook) { nn::set_between_layers_hook(std::move(hook)); }
BetweenLayersHook::~BetweenLayersHook() { nn::set_between_layers_hook(nullptr); }

void check_injected_failure(const Setup& s, int rank, int64_t step, const char* counted) {
  HT_CHECK(!(rank == s.fail_rank && step == s.fail_step), "failure injected by --debug-fail-at at ", counted, " ",
           step);
}

BackwardScale backward_scale(const Setup& s, int rank, int64_t step) {
  BackwardScale out;
  out.rank_scale = s.precision == Precision::FP16 ? s.loss_scaler.scale() : 1.0;
  const bool inject_overflow = rank == s.overflow_rank && step == s.overflow_step;
  out.loss_scale = inject_overflow ? std::numeric_limits<float>::infinity() : float(out.rank_scale);
  return out;
}

ComputeClock::ComputeClock()
    : start_(Clock::now()),
      cpu_start_(dist::SpeedEmulator::thread_cpu_seconds()),
      kernels_before_(ops::conv2d_kernels_made()) {}

double ComputeClock::stop(const Setup& s, int rank, int64_t global_step, bool first_step, double not_compute) {
  // Waits for the other ranks inside the local step (--bn sync, a detector's matches) are no compute either.
  const BatchStatsExchange::Spent exchange =
      s.batch_exchange ? s.batch_exchange->take_spent() : BatchStatsExchange::Spent();
  const double compute = seconds_since(start_) - not_compute - exchange.wall;
  setup_ = first_step || ops::conv2d_kernels_made() != kernels_before_;
  const double device_seconds = s.device_kind == Device::CUDA
                                    ? compute
                                    : dist::SpeedEmulator::thread_cpu_seconds() - cpu_start_ - exchange.cpu;
  return compute + s.emulator.apply(rank, global_step, device_seconds, setup_);
}

bool skip_for_overflow(LossScaler& scaler, int64_t nonfinite, const std::string& where, bool agreed, bool print) {
  const LossScaler::Verdict verdict = scaler.update(nonfinite > 0);
  if (verdict == LossScaler::Verdict::GiveUp) {
    const std::string message = nonfinite_gradient_error(where, nonfinite, scaler);
    if (agreed) throw AgreedError(message, __FILE__, __LINE__);
    HT_THROW(message);
  }
  if (verdict != LossScaler::Verdict::Skip) return false;
  if (print) {
    std::printf("%s\n", skipped_step_text(where, scaler).c_str());
    std::fflush(stdout);
  }
  return true;
}

void apply_update(Setup& s, float lr, bool skipped, bool check, MPI_Comm comm, const char* what) {
  nn::ParamBuffer& params = s.model->params();
  if (!skipped) s.sgd->step(params, lr);
  if (!check) return;
  const Tensor values = params.values().to(Device::CPU);
  dist::check_identical(comm, values.data(), params.count(), what);
}

EvalTotals validate(Setup& s, MPI_Comm comm) {
  return evaluate(*s.model, *s.val, s.val_input.get(), comm, kValidationChunk);
}

}  // namespace hetrain::train
