// nn/lr_schedule.cpp — linear warm-up, then cosine to 0, step decay or constant.
#include <cmath>

#include "hetrain/error.hpp"
#include "hetrain/optim.hpp"

namespace hetrain::optim {

LrSchedule::LrSchedule(const ScheduleConfig& config, int64_t global_batch, int64_t total_steps)
    : config_(config), total_steps_(total_steps) {
  HT_CHECK(config.decay == "cosine" || config.decay == "step" || config.decay == "constant",
           "lr schedule: unknown decay ", quoted(config.decay), " (known: cosine, step, constant)");
  HT_CHECK(std::isfinite(config.base_lr) && config.base_lr > 0.0f, "lr schedule: base lr must be a finite number > 0, got ",
           config.base_lr);
  HT_CHECK(global_batch >= 1, "lr schedule: global batch must be >= 1, got ", global_batch);
  HT_CHECK(total_steps >= 1, "lr schedule: total steps must be >= 1, got ", total_steps);
  HT_CHECK(config.warmup_steps >= 0 && config.warmup_steps <= total_steps, "lr schedule: warm-up steps (",
           config.warmup_steps, ") must be in [0, total steps = ", total_steps, "]");
  HT_CHECK(std::isfinite(config.warmup_bias_lr) && config.warmup_bias_lr >= 0.0f,
           "lr schedule: warm-up bias lr must be >= 0, got ", config.warmup_bias_lr);
  HT_CHECK(std::isfinite(config.warmup_momentum) && config.warmup_momentum < 1.0f,
           "lr schedule: warm-up momentum must be < 1 (negative: none), got ", config.warmup_momentum);
  for (size_t i = 1; i < config.milestones.size(); ++i)
    HT_CHECK(config.milestones[i] > config.milestones[i - 1], "lr schedule: milestones must increase");
  // Goyal et al. 2017: the learning rate grows linearly with the batch, relative to 256.
  peak_lr_ = config.linear_scaling ? config.base_lr * static_cast<float>(global_batch) / 256.0f : config.base_lr;
}

float LrSchedule::at(int64_t step) const {
  HT_CHECK(step >= 0, "lr schedule: negative step ", step);
  const int64_t warm = config_.warmup_steps;
  // Step s of the warm-up trains with peak·(s+1)/warm: small but non-zero at step 0, the peak at its end.
  if (step < warm) return peak_lr_ * static_cast<float>(step + 1) / static_cast<float>(warm);
  if (config_.decay == "constant") return peak_lr_;
  if (config_.decay == "step") {
    double lr = peak_lr_;
    for (int64_t m : config_.milestones)
      if (step >= m) lr *= config_.gamma;
    return static_cast<float>(lr);
  }
  // cosine from the peak at the end of warm-up to 0 at total_steps
  const int64_t span = total_steps_ - warm;
  if (span <= 0) return 0.0f;
  double t = static_cast<double>(step - warm) / static_cast<double>(span);
  if (t > 1.0) t = 1.0;
  return static_cast<float>(0.5 * peak_lr_ * (1.0 + std::cos(M_PI * t)));
}

// YOLOv5 interpolates over the warm-up from its start values to where the schedule is; with the weights'
// rate lr = peak·f, f = (s+1)/warm, that is bias lr = warmup_bias_lr·(1−f) + lr and momentum
// warmup_momentum + (μ − warmup_momentum)·f. (YOLOv5's f starts at 0 at its first step; ours at 1/warm, as
// the weights' rate does.)
StepRates LrSchedule::rates(int64_t step, float momentum) const {
  StepRates r;
  r.lr = r.bias_lr = at(step);
  r.momentum = momentum;
  const int64_t warm = config_.warmup_steps;
  if (step >= warm) return r;
  const double f = double(step + 1) / double(warm);
  if (config_.warmup_bias_lr > 0.0f) r.bias_lr = float(config_.warmup_bias_lr * (1.0 - f) + double(r.lr));
  if (config_.warmup_momentum >= 0.0f)
    r.momentum = float(config_.warmup_momentum + (double(momentum) - config_.warmup_momentum) * f);
  return r;
}

}  // namespace hetrain::optim
