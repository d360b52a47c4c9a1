// The per-step plumbing every training mode shares around LocalStep (docs/architecture.md, "Training
// loop"): the seed of a step's augmentation, the tests' injected failures and overflows, the loss scale of
// backward, the compute clock with its emulated speed and set-up filter, the overflow verdict, the SGD
// update and validation. A mode decides which samples a rank trains and how the ranks' results are
// combined; everything here is the same in every mode, written once.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "hetrain/optim.hpp"
#include "train/evaluate.hpp"
#include "train/loss_scale.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The seed of the augmentation draws of `epoch`'s samples. Each sample's crop and flip come from this seed
// and the sample's dataset index (train/batch_source.hpp), so a sample draws the same on any rank, in any
// mode and after any resume: one formula is what lets any mode resume any mode's checkpoint unchanged.
uint64_t augmentation_seed(uint64_t seed, int64_t epoch);

// Sets the hook called between layers (nn::set_between_layers_hook) for its lifetime, so no exception
// leaves it set; an empty hook sets none.
class BetweenLayersHook {
 public:
  explicit BetweenLayersHook(std::function<void()> hook);
  ~BetweenLayersHook();
  BetweenLayersHook(const BetweenLayersHook&) = delete;
  BetweenLayersHook& operator=(const BetweenLayersHook&) = delete;
};

// Sets the calling thread's work while it waits for its GPU (cuda::set_wait_hook) for its lifetime. Only
// for a hook that may run in the middle of any device wait: the elastic modes' MPI progress is (it touches
// only this rank's own shard of the center), while sync mode's bucket progress is not (a bucket's own
// host-staged copy waits for the device).
class DeviceWaitHook {
 public:
  explicit DeviceWaitHook(std::function<void()> hook);
  ~DeviceWaitHook();
  DeviceWaitHook(const DeviceWaitHook&) = delete;
  DeviceWaitHook& operator=(const DeviceWaitHook&) = delete;
};

// --debug-fail-at: throws on the rank and at the step given (tests of the no-hang path). `counted` names
// the step as the mode counts it ("step", "local step").
void check_injected_failure(const Setup& s, int rank, int64_t step, const char* counted);

// The factor this rank's loss gradient is multiplied by before backward: the FP16 loss scale (1 in other
// precisions, train/loss_scale.hpp), or +Inf on the rank and step of --debug-overflow-at. `rank_scale` is
// what the combine step divides back out (the injected Inf is meant to stay).
struct BackwardScale {
  double rank_scale = 1;
  float loss_scale = 1;
};
BackwardScale backward_scale(const Setup& s, int rank, int64_t step);

// Times one local step's compute. A step is set-up, neither emulated nor a sample of the rank's speed,
// when it is the process's first or when it made convolution kernels for a new batch size (oneDNN's JIT,
// cuDNN's search: docs/architecture.md, "Emulated heterogeneity").
class ComputeClock {
 public:
  ComputeClock();  // starts the clock
  // Stops it: seconds since the start less `not_compute` (waits inside the step) and less the time in --bn
  // sync's exchange, plus the sleep that --emulate-speed adds at `global_step` (a CPU rank's emulation
  // scales its thread's CPU time).
  double stop(const Setup& s, int rank, int64_t global_step, bool first_step, double not_compute = 0);
  bool setup() const { return setup_; }  // valid after stop()

 private:
  Clock::time_point start_;
  double cpu_start_;
  int64_t kernels_before_;
  bool setup_ = false;
};

// The verdict on a combined gradient with `nonfinite` NaN/Inf values (0: finite): true when the step is to
// be skipped (FP16: the scale was halved; rank 0 of the reduction prints it when `print`). When the scaler
// gives up, throws: an AgreedError when every rank of the job reached the same verdict (`agreed`), else
// an Error that ends the job from this rank. `where` names the step in messages.
bool skip_for_overflow(LossScaler& scaler, int64_t nonfinite, const std::string& where, bool agreed, bool print,
                       const std::string& what = "the reduced gradient");

// Step `step`'s rates: the schedule's lr, and the warm-up's bias rate and momentum (optim::LrSchedule::rates).
optim::StepRates step_rates(const Setup& s, int64_t step);
// The start-up line's words for the schedule: "peak lr 0.01", and the warm-up with YOLOv5's rates when set.
std::string schedule_text(const Setup& s);

// Before the first forward of an update that may be skipped (an FP16 loss scaler, or --debug-overflow-at):
// a copy of the batch-norm running statistics, which apply_update puts back when the update is skipped.
// A skipped step then leaves no trace in them, and an overflow in forward cannot leave NaN/Inf behind.
void remember_running_stats(Setup& s);

// The SGD step at `rates`, unless skipped (then the running statistics go back to what
// remember_running_stats kept); then, with `check` (--debug-consistency), compares the parameters across
// `comm`, whose ranks must hold identical replicas ("what": the message's name for them).
void apply_update(Setup& s, const optim::StepRates& rates, bool skipped, bool check, MPI_Comm comm, const char* what);

// Collective over `comm`: the model on the validation set, as every mode validates.
EvalTotals validate(Setup& s, MPI_Comm comm);

}  // namespace hetrain::train
