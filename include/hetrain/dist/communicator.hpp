// hetrain/dist/communicator.hpp — how ranks sum gradients.
//
// Each rank's gradient is the mean over its own b_r samples. Scaling it by b_r/B and summing over ranks
// gives exactly the mean over the global batch B (docs/architecture.md, invariant 1). The interface is the same for
// every backend: MPI on host memory, NCCL on GPU memory, and MPI on behalf of a GPU rank in a job that
// also has CPU ranks (its gradients go to the host and back).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hetrain/tensor.hpp"

namespace hetrain::cuda {
class NcclCommunicator;
}

namespace hetrain::dist {

class Communicator {
 public:
  virtual ~Communicator();
  virtual const char* name() const = 0;
  // In place: data[i] = Σ_ranks data[i]. Collective: every rank calls it with the same n.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  // grads *= weight (weight = b_r / B), then allreduce_sum. A rank with weight 0 (b_r = 0) still takes
  // part; its buffer is zero-filled rather than multiplied, so stale or NaN contents cannot leak in.
  // The buffer lives where the communicator expects it (device memory for NCCL and the staged one).
  virtual void weighted_allreduce(float* grads, int64_t n, double weight);
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

// ---------------------------------------------------------------- device-aware selection
// NCCL when every rank trains on a GPU and NCCL is built in; otherwise MPI (CPU nodes can join a GPU job
// as slow workers, and the balancer gives them small shares).
enum class Reduction { Mpi, Nccl };
Reduction choose_reduction(const std::vector<Device>& rank_devices, bool nccl_built);
const char* reduction_name(Reduction r);

// Collective over comm: gathers every rank's device, chooses as above and builds this rank's
// communicator — NCCL (unique id broadcast over MPI), MPI on host buffers, or, for a GPU rank of a mixed
// job, MPI through a pinned host copy of the device buffer.
std::unique_ptr<Communicator> make_gradient_communicator(MPI_Comm comm, Device mine, bool polite_wait);

// Sums device buffers with NCCL on the GPUs (src/cuda's NcclCommunicator). Scaling runs on the GPU.
class NcclGradCommunicator : public Communicator {
 public:
  NcclGradCommunicator(MPI_Comm comm, double timeout_s = 300.0);  // collective
  ~NcclGradCommunicator() override;
  const char* name() const override { return "nccl"; }
  void allreduce_sum(float* device_data, int64_t n) override;
  void weighted_allreduce(float* device_grads, int64_t n, double weight) override;

 private:
  std::unique_ptr<cuda::NcclCommunicator> nccl_;
};

// A GPU rank in a job reduced over MPI: copies the device buffer to pinned host memory, lets `host`
// reduce it there, and copies the result back.
class HostStagedCommunicator : public Communicator {
 public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> host);
  ~HostStagedCommunicator() override;
  const char* name() const override { return "mpi (staged through host memory)"; }
  void allreduce_sum(float* device_data, int64_t n) override;
  void weighted_allreduce(float* device_grads, int64_t n, double weight) override;

 private:
  float* stage(const float* device_data, int64_t n);  // device → pinned host, returns the host copy
  void unstage(float* device_data, int64_t n);       // pinned host → device
  std::unique_ptr<Communicator> host_;
  float* pinned_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace hetrain::dist
