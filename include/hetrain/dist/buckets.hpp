// hetrain/dist/buckets.hpp — gradient buckets reduced while backward goes on (docs/architecture.md,
// "Gradient reduction").
//
// The flat gradient buffer is cut at parameter boundaries into buckets of about --bucket-mb, from its end:
// parameters are declared in forward order, so backward finishes them last-first, and the first bucket is
// complete earliest. During backward the model says which gradients are final (nn::GradsFinal); each bucket
// whose whole range is final then starts its weighted reduction at once (Communicator::start_weighted_*),
// and the started ones advance between layers. finish() waits for all of them before the NaN/Inf check and
// the optimizer. Every rank makes the same plan from the same model, and starts the buckets in plan order.
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/dist/communicator.hpp"

namespace hetrain::dist {

struct Bucket {
  int64_t begin = 0, end = 0;  // [begin, end) floats of the flat gradient buffer
  int64_t size() const { return end - begin; }
};

// Buckets over a buffer of `count` floats whose parameters begin at `param_begins` (ascending, the first 0):
// whole parameters, gathered from the end of the buffer until a bucket holds at least `bucket_floats`
// (the last one, at offset 0, may hold less). bucket_floats <= 0: one bucket, the whole buffer. Returned in
// the order they become final: descending offsets, together covering [0, count) once.
std::vector<Bucket> plan_buckets(const std::vector<int64_t>& param_begins, int64_t count, int64_t bucket_floats);

// --bucket-mb (MiB, as PyTorch DDP's bucket_cap_mb) in floats; 0 for 0. Throws for a negative or non-finite value.
int64_t bucket_floats(double mb);

class BucketedReduction {
 public:
  // wire: what the buckets' sums travel as (--reduce-precision); the communicator must carry it.
  BucketedReduction(Communicator& comm, std::vector<Bucket> buckets, Wire wire = Wire::FP32);
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // A new step over `grads` (the flat buffer, on the communicator's device) with this rank's weight b_r/B.
  void begin(float* grads, double weight);
  // Gradients at [first_final, end) are final: starts, in plan order, every bucket lying wholly there.
  void grads_final(int64_t first_final);
  void progress() { comm_.progress(); }
  // Starts every bucket not started yet (a rank with b_r = 0 runs no backward), then waits for all.
  void start_rest() { grads_final(0); }
  void finish();
  int64_t started() const { return int64_t(next_); }

 private:
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  float* grads_ = nullptr;
  double weight_ = 0;
  Wire wire_;
  size_t next_ = 0;  // the first bucket not started yet this step
};

}  // namespace hetrain::dist
