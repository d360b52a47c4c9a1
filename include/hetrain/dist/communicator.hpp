// hetrain/dist/communicator.hpp — how ranks sum gradients.
//
// Each rank's gradient is the mean over its own b_r samples. Scaling it by b_r/B and summing over ranks
// gives exactly the mean over the global batch B (docs/architecture.md, invariant 1). The interface is the same for
// every backend: MPI on host memory, NCCL on GPU memory, and MPI on behalf of a GPU rank in a job that
// also has CPU ranks (its gradients go to the host and back).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/dist/wire.hpp"
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
  // The same sum with what crosses between ranks rounded to `wire` (16 bits: hetrain/dist/wire.hpp). Every
  // rank ends with the same values. This default serves FP32 only and throws for the 16-bit formats.
  virtual void allreduce_sum_on_wire(float* data, int64_t n, Wire wire);
  // Whether allreduce_sum_on_wire (and the weighted calls below) take `wire`; FP32 always.
  virtual bool carries(Wire wire) const { return wire == Wire::FP32; }
  // grads *= weight (weight = b_r / B), then the sum on `wire`. A rank with weight 0 (b_r = 0) still takes
  // part; its buffer is zero-filled rather than multiplied, so stale or NaN contents cannot leak in.
  // The buffer lives where the communicator expects it (device memory for NCCL and the staged one).
  virtual void weighted_allreduce(float* grads, int64_t n, double weight, Wire wire = Wire::FP32);

  // Started reductions, for buckets overlapped with backward (docs/architecture.md, "Gradient reduction").
  // start_weighted_allreduce begins what weighted_allreduce does on one bucket and returns; progress()
  // lets the started ones advance (MPI moves only inside MPI calls: call it often, e.g. between layers);
  // wait_all() returns once every started one is done. Every rank starts the same buckets in the same
  // order, and nothing else may use the buffers until wait_all() returns.
  // This default defers the work to wait_all(), merging adjacent buckets of one weight into one
  // weighted_allreduce: no overlap, and exactly the result of one call (NCCL and host-staged ranks).
  // Every bucket in flight at once has the same wire.
  virtual void start_weighted_allreduce(float* grads, int64_t n, double weight, Wire wire = Wire::FP32);
  virtual void progress() {}
  virtual void wait_all();
  // How many of the buckets started since the last wait_all() are done, counted from the first (a later
  // one may be done before an earlier one is not counted); and a wait until the first `count` are. For a
  // pipeline that starts more work on what came back (PowerSGD's Q's after its P's). This default knows
  // of none done before wait_all(), and waits for all of them.
  virtual int64_t finished() const { return 0; }
  virtual void wait_first(int64_t count) {
    if (count > 0) wait_all();
  }
  // True when start_weighted_allreduce really starts communication (it overlaps with what follows).
  virtual bool overlaps() const { return false; }
  // Called between tests while this rank waits for the others in an MPI reduction (the stall watch's
  // signs of life, dist::StepArrival::keep_alive). With a hook set, MPI waits test instead of blocking.
  virtual void set_idle_hook(std::function<void()> hook) { idle_hook_ = std::move(hook); }

 protected:
  void idle() const {
    if (idle_hook_) idle_hook_();
  }
  bool has_idle_hook() const { return bool(idle_hook_); }

 private:
  std::function<void()> idle_hook_;
  struct Deferred {
    float* data;
    int64_t n;
    double weight;
    Wire wire;
  };
  std::vector<Deferred> deferred_;
};

// Scales a bucket by the rank's weight b_r/B before it is summed: zero-fill for weight 0 (stale or NaN
// contents cannot leak in), nothing for weight 1. Throws for a weight outside [0, 1]. Host memory.
void apply_weight(float* grads, int64_t n, double weight);

// How gradients cross nodes (docs/architecture.md, "Gradient reduction"): flat = one allreduce over all
// ranks; hierarchical = a reduce inside each node (shared memory), an allreduce between one leader per node,
// a broadcast inside each node, so every byte crosses the network once per node instead of once per rank.
enum class Hierarchy { Auto, On, Off };
Hierarchy parse_hierarchy(const std::string& text);  // auto | on | off; throws naming --hierarchical
// Auto: hierarchical when the job spans more than one node and some node runs more than one rank.
bool use_hierarchy(Hierarchy h, int nodes, int max_ranks_per_node);

class MpiCommunicator : public Communicator {
 public:
  // Collective over comm (the communicators it uses are duplicates of its own, so its reductions are never
  // ordered against other collectives on comm).
  // max_chunk: elements per MPI call (counts above INT_MAX are split; a smaller value is useful for tests).
  // polite_wait: wait for the reduction by testing and sleeping instead of spinning inside MPI (for nodes
  // with more ranks than cores, see node_oversubscribed).
  // node_comm: MPI_COMM_NULL = flat; else the ranks of comm that share this rank's node (each rank passes
  // its own node's communicator, e.g. from MPI_Comm_split_type): reduce hierarchically over those nodes.
  explicit MpiCommunicator(MPI_Comm comm, int64_t max_chunk = 0, bool polite_wait = false,
                           MPI_Comm node_comm = MPI_COMM_NULL);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  const char* name() const override { return name_.c_str(); }  // "mpi", "mpi (hierarchical over 2 nodes)"
  void allreduce_sum(float* data, int64_t n) override;
  // 16 bits: the allreduce between ranks (between node leaders when hierarchical) becomes an all-to-all of
  // 16-bit blocks, each rank's block summed in FP32 in rank order and rounded once, and an all-gather of
  // the rounded blocks: ring allreduce's bytes at half the width, and the same bits on every rank. Inside a
  // node (hierarchical) values stay FP32: they cross no network.
  void allreduce_sum_on_wire(float* data, int64_t n, Wire wire) override;
  bool carries(Wire) const override { return true; }
  void start_weighted_allreduce(float* grads, int64_t n, double weight, Wire wire = Wire::FP32) override;
  void progress() override;
  void wait_all() override;
  int64_t finished() const override;
  void wait_first(int64_t count) override;
  bool overlaps() const override { return true; }
  bool hierarchical() const { return stages_.size() > 1; }
  int nodes() const { return nodes_; }

 private:
  // One step of a reduction on one communicator; a rank outside it (MPI_COMM_NULL: a node's non-leader in
  // the leaders' allreduce) skips it.
  // Exchange16/Gather16: the two halves of a 16-bit allreduce, each on a communicator of its own so that
  // every rank issues each one's collectives in bucket order.
  enum class Op { Allreduce, ReduceToRoot, BcastFromRoot, Exchange16, Gather16 };
  struct Stage {
    Op op;
    MPI_Comm comm;
    int rank = 0, size = 1;  // this rank's place in comm
  };
  // A started bucket: the stages it has begun, and the requests of the newest one (one per chunk).
  struct InFlight {
    float* data = nullptr;
    int64_t n = 0;
    Wire wire = Wire::FP32;
    const std::vector<Stage>* stages = nullptr;  // stages_ or stages16_
    size_t begun = 0;
    bool ending = false;  // the newest stage began and what follows its completion has not run yet
    std::vector<MPI_Request> requests;
    int64_t block = 0;                 // 16 bits: values per rank's block
    std::vector<uint16_t> sent, got;   // 16 bits: this rank's blocks, and what the others sent for its own
  };
  Stage stage(Op op, MPI_Comm comm) const;
  void begin(float* data, int64_t n, Wire wire);  // pushes a bucket and starts its first stage
  void start_stage(InFlight& f, const Stage& stage);
  void start_16bit_stage(InFlight& f, const Stage& stage);
  void end_stage(InFlight& f, const Stage& stage);
  bool advance(size_t index);  // true when that bucket has finished every stage
  static bool finished(const InFlight& f) { return f.begun == f.stages->size() && f.requests.empty() && !f.ending; }
  std::vector<Stage> stages_;    // FP32
  std::vector<Stage> stages16_;  // the same with the allreduce as Exchange16 + Gather16
  std::vector<MPI_Comm> owned_;  // the duplicates and splits this object frees
  std::vector<InFlight> in_flight_;
  std::vector<std::vector<uint16_t>> spare_;  // 16-bit buffers of finished buckets, reused
  int64_t max_chunk_;
  bool polite_wait_;
  int nodes_ = 1;
  std::string name_ = "mpi";
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
// communicator — NCCL (unique id broadcast over MPI; NCCL arranges its own rings and trees across nodes),
// MPI on host buffers, or, for a GPU rank of a mixed job, MPI through a pinned host copy of the device
// buffer. The MPI ones are hierarchical over the nodes of node_comm as `hierarchy` and use_hierarchy say.
std::unique_ptr<Communicator> make_gradient_communicator(MPI_Comm comm, Device mine, bool polite_wait,
                                                         Hierarchy hierarchy = Hierarchy::Off,
                                                         MPI_Comm node_comm = MPI_COMM_NULL);

// Sums device buffers with NCCL on the GPUs (src/cuda's NcclCommunicator). Scaling runs on the GPU.
class NcclGradCommunicator : public Communicator {
 public:
  NcclGradCommunicator(MPI_Comm comm, double timeout_s = 300.0);  // collective
  ~NcclGradCommunicator() override;
  const char* name() const override { return "nccl"; }
  void allreduce_sum(float* device_data, int64_t n) override;
  void weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire = Wire::FP32) override;
  // Buckets: scaled on the compute stream, then reduced on NCCL's own stream once the compute stream's
  // work so far (the bucket's gradients) is done, while backward goes on; NCCL progresses by itself.
  void start_weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire = Wire::FP32) override;
  void wait_all() override;
  bool overlaps() const override { return true; }
  // 16 bits: NCCL's own allreduce in bfloat16/half, which rounds each partial sum (unlike the MPI path's
  // single rounding of an FP32 sum); its results are the same on every rank.
  bool carries(Wire) const override { return true; }

 private:
  std::unique_ptr<cuda::NcclCommunicator> nccl_;
};

// How a host-staged communicator moves a device buffer to host memory and back: CUDA's pinned memory and
// copies (cuda_host_staging), or plain memory in tests of the staging logic on machines without a GPU.
class HostStaging {
 public:
  virtual ~HostStaging() = default;
  virtual float* alloc(int64_t n) = 0;  // host memory for n floats
  virtual void release(float* host) noexcept = 0;
  // Each returns once the copy is complete; to_host first waits for the device work that produced `device`.
  virtual void to_host(float* host, const float* device, int64_t n) = 0;
  virtual void to_device(float* device, const float* host, int64_t n) = 0;
};
std::unique_ptr<HostStaging> cuda_host_staging();

// A GPU rank in a job reduced over MPI: copies the device buffer to pinned host memory, lets `host`
// reduce it there, and copies the result back. Started buckets are started on the host as they come, each
// from a host copy of its own, so that this rank issues the same collectives in the same order as the CPU
// ranks beside it (MPI never matches one rank's blocking collective with another's started ones).
class HostStagedCommunicator : public Communicator {
 public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> host,
                                  std::unique_ptr<HostStaging> staging = cuda_host_staging());
  ~HostStagedCommunicator() override;
  const char* name() const override { return name_.c_str(); }  // the host one's, "(staged through host memory)"
  void allreduce_sum(float* device_data, int64_t n) override;
  void allreduce_sum_on_wire(float* device_data, int64_t n, Wire wire) override;
  bool carries(Wire wire) const override { return host_->carries(wire); }
  void weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire = Wire::FP32) override;
  void start_weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire = Wire::FP32) override;
  void progress() override { host_->progress(); }
  void wait_all() override;
  bool overlaps() const override { return host_->overlaps(); }
  // The waits happen in the host communicator: it hears the hook too.
  void set_idle_hook(std::function<void()> hook) override {
    host_->set_idle_hook(hook);
    Communicator::set_idle_hook(std::move(hook));
  }

 private:
  struct Slot {  // host memory for one started bucket, kept across steps
    float* host = nullptr;
    int64_t capacity = 0;
    float* device = nullptr;  // the bucket it holds now
    int64_t n = 0;
  };
  Slot& slot(size_t index, int64_t n);  // slot `index`, grown to n floats
  // A blocking call: the device buffer to slot 0, `reduce` on that host copy, and back.
  void blocking(float* device_data, int64_t n, const std::function<void(float*)>& reduce);
  std::unique_ptr<Communicator> host_;
  std::unique_ptr<HostStaging> staging_;
  std::string name_;
  std::vector<Slot> slots_;  // slot 0 also serves the blocking calls
  size_t started_ = 0;       // slots holding started buckets
};

}  // namespace hetrain::dist
