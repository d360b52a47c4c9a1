// Dynamic loss scaling for FP16 GPU ranks (docs/precision.md, "Loss scaling").
//
// FP16 holds magnitudes from 6e-8 (subnormal) to 65504: small gradients of a backward pass in FP16 flush
// to zero. Each FP16 rank therefore multiplies its loss gradient by the scale S before backward and takes
// S back out in the reduction weight (b_r / (B·S)), so the reduced gradient and the FP32 update do not
// depend on S. A scale too large makes some value overflow to Inf; that shows as NaN/Inf in the reduced
// gradient, which every rank sees alike, so every rank skips that step and halves S. After
// `growth_interval` good steps in a row S doubles again. The state is the same on every rank of the
// reduction (sync: all; hybrid: a group; async: one rank) and travels in checkpoints.
#pragma once

#include <cstdint>
#include <string>

namespace hetrain::train {

class LossScaler {
 public:
  struct Config {
    double initial = 65536;         // 2^16, as PyTorch's GradScaler
    int64_t growth_interval = 2000;  // good steps in a row before the scale doubles
    double min_scale = 1;           // overflowing below this is divergence, not a scale too large
    // The scale stops doubling here: a run whose gradients never overflow (they shrank to nothing, or
    // every rank is FP32 but one) would otherwise double it every interval until it is Inf in FP32.
    double max_scale = 16777216;    // 2^24
  };
  enum class Verdict {
    Apply,   // the gradient is finite: take the step
    Skip,    // overflow: skip this step; the scale was halved
    GiveUp,  // overflow at the smallest scale: the run diverges (or overflows in the forward pass)
  };

  // Inactive (any precision but fp16): scale() is 1, and every overflow is GiveUp.
  explicit LossScaler(bool active, Config config);
  explicit LossScaler(bool active) : LossScaler(active, Config{}) {}
  bool active() const { return active_; }
  double scale() const { return active_ ? scale_ : 1.0; }
  // After the step's reduction: whether the reduced gradient had NaN/Inf values.
  Verdict update(bool overflow);
  int64_t skipped() const { return skipped_; }  // steps skipped by this process
  // Checkpoint state: the scale and the good steps since it last changed.
  int64_t good_steps() const { return good_steps_; }
  void restore(double scale, int64_t good_steps);

 private:
  bool active_;
  Config config_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

// What a step that the scaler skipped prints: "step 12 (rank 3's local step 40): FP16 overflow ... loss scale
// now 32768". `where` names the step as the mode counts it.
std::string skipped_step_text(const std::string& where, const LossScaler& scaler);
// The error of a step whose gradient has `nonfinite` NaN/Inf values when the scaler gives up (or is inactive).
// `where` names the step, the mode and the rank or group ("step 7 (sync mode)"); `what` the gradient
// ("the reduced gradient", "rank 3's local gradient").
std::string nonfinite_gradient_error(const std::string& where, int64_t nonfinite, const LossScaler& scaler,
                                     const std::string& what = "the reduced gradient");

}  // namespace hetrain::train
