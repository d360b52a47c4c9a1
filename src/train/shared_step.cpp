#include "train/shared_step.hpp"

#include <cstdio>
#include <limits>

#include "hetrain/cuda.hpp"
#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "ops/conv2d/conv2d.hpp"

namespace hetrain::train {

// Samples go through the model this many at a time when validating.
constexpr int64_t kValidationChunk = 256;

uint64_t augmentation_seed(uint64_t seed, int64_t epoch) {
  return seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch) * 1000003ull;
}

BetweenLayersHook::BetweenLayersHook(std::function<void()> hook) { nn::set_between_layers_hook(std::move(hook)); }
BetweenLayersHook::~BetweenLayersHook() { nn::set_between_layers_hook(nullptr); }

DeviceWaitHook::DeviceWaitHook(std::function<void()> hook) { cuda::set_wait_hook(std::move(hook)); }
DeviceWaitHook::~DeviceWaitHook() { cuda::set_wait_hook(nullptr); }

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

bool skip_for_overflow(LossScaler& scaler, int64_t nonfinite, const std::string& where, bool agreed, bool print,
                       const std::string& what) {
  const LossScaler::Verdict verdict = scaler.update(nonfinite > 0);
  if (verdict == LossScaler::Verdict::GiveUp) {
    const std::string message = nonfinite_gradient_error(where, nonfinite, scaler, what);
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

optim::StepRates step_rates(const Setup& s, int64_t step) {
  return s.schedule->rates(step, s.sgd->config().momentum);
}

std::string schedule_text(const Setup& s) {
  const optim::ScheduleConfig& c = s.schedule->config();
  char text[200];
  int n = std::snprintf(text, sizeof text, "peak lr %.4g", s.schedule->peak_lr());
  if (c.warmup_steps > 0 && n > 0 && size_t(n) < sizeof text) {
    n += std::snprintf(text + n, sizeof text - size_t(n), ", warm-up %lld steps", (long long)c.warmup_steps);
    if (c.warmup_bias_lr > 0 && size_t(n) < sizeof text)
      n += std::snprintf(text + n, sizeof text - size_t(n), " (biases from lr + %.4g", c.warmup_bias_lr);
    if (c.warmup_momentum >= 0 && size_t(n) < sizeof text)
      n += std::snprintf(text + n, sizeof text - size_t(n), "%s momentum from %.4g", c.warmup_bias_lr > 0 ? "," : " (",
                         c.warmup_momentum);
    if ((c.warmup_bias_lr > 0 || c.warmup_momentum >= 0) && size_t(n) < sizeof text)
      std::snprintf(text + n, sizeof text - size_t(n), ")");
  }
  return text;
}

void remember_running_stats(Setup& s) {
  const nn::ParamBuffer& params = s.model->params();
  if (params.state_count() == 0 || (!s.loss_scaler.active() && s.overflow_rank < 0)) return;
  if (!s.stats_before_step.defined() || s.stats_before_step.device() != params.states().device())
    s.stats_before_step = params.states().clone();
  else
    s.stats_before_step.copy_from(params.states());
}

void apply_update(Setup& s, const optim::StepRates& rates, bool skipped, bool check, MPI_Comm comm, const char* what) {
  nn::ParamBuffer& params = s.model->params();
  if (!skipped) s.sgd->step(params, rates);
  if (skipped && s.stats_before_step.defined()) params.states().copy_from(s.stats_before_step);
  if (!check) return;
  const Tensor values = params.values().to(Device::CPU);
  dist::check_identical(comm, values.data(), params.count(), what);
}

EvalTotals validate(Setup& s, MPI_Comm comm) {
  return evaluate(*s.model, *s.val, s.val_input.get(), comm, kValidationChunk);
}

}  // namespace hetrain::train
