// hetrain/dist/communicator.hpp — how ranks sum gradients.
//
// Each rank's gradient is the mean over its own b_r samples. Scaling it by b_r/B and summing over ranks
// gives exactly the mean over the global batch B (DESIGN.md, invariant 1). The interface is the same for
// every backend: MPI here, NCCL in the CUDA backend.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace hetrain::dist {

class Communicator {
 public:
  virtual ~Communicator();
  virtual const char* name() const = 0;
  // In place: data[i] = Σ_ranks data[i]. Collective: every rank calls it with the same n.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  // grads *= weight (weight = b_r / B), then allreduce_sum. A rank with weight 0 (b_r = 0) still takes
  // part; its buffer is zero-filled rather than multiplied, so stale or NaN contents cannot leak in.
  void weighted_allreduce(float* grads, int64_t n, double weight);
};

class MpiCommunicator : public Communicator {
 public:
  // max_chunk: elements per MPI_Allreduce call (counts above INT_MAX are split; a smaller value is useful
  // for tests and for bucketing).
  // polite_wait: wait for the reduction by testing and sleeping instead of spinning inside MPI (for nodes
  // with more ranks than cores, see node_oversubscribed).
  explicit MpiCommunicator(MPI_Comm comm, int64_t max_chunk = 0, bool polite_wait = false);
  const char* name() const override { return "mpi"; }
  void allreduce_sum(float* data, int64_t n) override;

 private:
  MPI_Comm comm_;
  int64_t max_chunk_;
  bool polite_wait_;
};

// True when this node runs more ranks than it has hardware threads.
bool node_oversubscribed(int local_ranks);

}  // namespace hetrain::dist
