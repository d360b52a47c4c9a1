// hetrain/op_profile.hpp — what the convolutions and dense layers compute and how long they take, per
// layer shape (docs/cpu-performance.md, "Against the machine's peak"). Off by default: when off the ops
// only test one flag. bench_train_step turns it on to count a step's floating-point operations from the
// shapes the ops actually see, and to print where a step's time goes.
//
// FLOPs are counted as 2 per multiply-add: a convolution's forward 2·N·K·C·R·S·P·Q, its backward that again
// for the input gradient (when one is asked for) and for the weight gradient; a dense layer's 2·N·I·O
// likewise. Everything else counts as none, as FLOP counts of CNNs usually do; the memory-bound ops among it
// (batch norm, element-wise activations, residual adds, pooling, SGD) are timed per op (OpProfileScope), and
// what no op timed (the loss, copies, the layers' own bookkeeping) is the step's remainder.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::ops {

struct OpProfileRow {
  std::string what;  // "conv 3x3 s1 64->64 @56x56" (per sample), "linear 2048->1000"
  int64_t calls = 0;
  double seconds = 0;  // host wall time inside the op (on a GPU: the time to enqueue, not to run)
  double flops = 0;
};

void set_op_profiling(bool on);
bool op_profiling();
void op_profile_add(const std::string& what, double seconds, double flops);
void op_profile_reset();
std::vector<OpProfileRow> op_profile();  // rows by descending time

// Times its scope into the row `what` (no FLOPs) while profiling is on; only a flag test when it is off.
class OpProfileScope {
 public:
  explicit OpProfileScope(const char* what) : what_(op_profiling() ? what : nullptr) {
    if (what_) start_ = std::chrono::steady_clock::now();
  }
  ~OpProfileScope() {
    if (!what_) return;
    op_profile_add(what_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), 0);
  }
  OpProfileScope(const OpProfileScope&) = delete;
  OpProfileScope& operator=(const OpProfileScope&) = delete;

 private:
  const char* what_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hetrain::ops
