#include "train/loss_scale.hpp"

#include <algorithm>
#include <cstdio>

#include "hetrain/error.hpp"

namespace hetrain::train {

LossScaler::LossScaler(bool active, Config config) : active_(active), config_(config), scale_(config.initial) {
  HT_CHECK(config.initial >= config.min_scale && config.min_scale > 0 && config.growth_interval > 0 &&
               config.max_scale >= config.initial,
           "LossScaler: bad configuration");
}

LossScaler::Verdict LossScaler::update(bool overflow) {
  if (!overflow) {
    if (active_ && ++good_steps_ >= config_.growth_interval) {
      // Powers of two: scaling and unscaling are exact in binary floating point.
      if (scale_ * 2 <= config_.max_scale) scale_ *= 2;
      good_steps_ = 0;
    }
    return Verdict::Apply;
  }
  if (!active_ || scale_ / 2 < config_.min_scale) return Verdict::GiveUp;
  scale_ /= 2;
  good_steps_ = 0;
  ++skipped_;
  return Verdict::Skip;
}

void LossScaler::restore(double scale, int64_t good_steps) {
  HT_CHECK(scale >= config_.min_scale && good_steps >= 0, "loss scale ", scale, " with ", good_steps,
           " good steps is not a valid state");
  scale_ = std::min(scale, config_.max_scale);  // a checkpoint from before the cap may hold more
  good_steps_ = good_steps;
}

std::string skipped_step_text(const std::string& where, const LossScaler& scaler) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", scaler.scale());
  return where + ": FP16 gradient overflow (NaN/Inf after the reduction): step skipped, loss scale now " + text;
}

std::string nonfinite_gradient_error(const std::string& where, int64_t nonfinite, const LossScaler& scaler,
                                     const std::string& what) {
  std::string text = where + ": " + what + " has " + std::to_string(nonfinite) + " NaN/Inf values";
  if (scaler.active())
    return text + " even at loss scale " + std::to_string(int64_t(scaler.scale())) +
           " (the loss diverged or FP16 overflows in the forward pass: lower --lr, add --warmup-epochs, or use "
           "--precision bf16)";
  return text + " (the loss diverged: lower --lr, add --warmup-epochs, or check the data)";
}

}  // namespace hetrain::train
