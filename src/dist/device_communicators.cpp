// dist/device_communicators.cpp — choosing how a job reduces gradients, and the two communicators for
// gradients in GPU memory: NCCL, and MPI through host memory for a GPU rank in a job with CPU ranks.
#include <algorithm>
#include <cstring>
#include <string>

#include "hetrain/cuda.hpp"
#include "hetrain/dist/communicator.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

Reduction choose_reduction(const std::vector<Device>& rank_devices, bool nccl_built) {
  if (!nccl_built || rank_devices.empty()) return Reduction::Mpi;
  for (Device d : rank_devices)
    if (d != Device::CUDA) return Reduction::Mpi;
  return Reduction::Nccl;
}

const char* reduction_name(Reduction r) { return r == Reduction::Nccl ? "nccl" : "mpi"; }

std::unique_ptr<Communicator> make_gradient_communicator(MPI_Comm comm, Device mine, bool polite_wait,
                                                         Hierarchy hierarchy, MPI_Comm node_comm) {
  int size = 0;
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int my_device = mine == Device::CUDA ? 1 : 0;
  std::vector<int> all(size);
  HT_MPI_CHECK(MPI_Allgather(&my_device, 1, MPI_INT, all.data(), 1, MPI_INT, comm));
  std::vector<Device> devices;
  for (int d : all) devices.push_back(d ? Device::CUDA : Device::CPU);
  if (choose_reduction(devices, cuda_built()) == Reduction::Nccl) return std::make_unique<NcclGradCommunicator>(comm);
  // How many nodes, and the most ranks on one: every rank learns the same two numbers, so all choose alike.
  int nodes_and_most[2] = {1, 1};
  if (node_comm != MPI_COMM_NULL) {
    int node_rank = 0, node_size = 0;
    HT_MPI_CHECK(MPI_Comm_rank(node_comm, &node_rank));
    HT_MPI_CHECK(MPI_Comm_size(node_comm, &node_size));
    int leader = node_rank == 0 ? 1 : 0;
    HT_MPI_CHECK(MPI_Allreduce(&leader, &nodes_and_most[0], 1, MPI_INT, MPI_SUM, comm));
    HT_MPI_CHECK(MPI_Allreduce(&node_size, &nodes_and_most[1], 1, MPI_INT, MPI_MAX, comm));
  }
  const bool tiered = node_comm != MPI_COMM_NULL && use_hierarchy(hierarchy, nodes_and_most[0], nodes_and_most[1]);
  auto host = std::make_unique<MpiCommunicator>(comm, 0, polite_wait, tiered ? node_comm : MPI_COMM_NULL);
  if (mine == Device::CUDA) return std::make_unique<HostStagedCommunicator>(std::move(host));
  return host;
}

// ---------------------------------------------------------------- NCCL
NcclGradCommunicator::NcclGradCommunicator(MPI_Comm comm, double timeout_s) {
  int rank = 0, size = 0;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  cuda::NcclIdBytes id{};
  if (rank == 0) id = cuda::nccl_unique_id();
  HT_MPI_CHECK(MPI_Bcast(id.data(), int(id.size()), MPI_BYTE, 0, comm));
  nccl_ = std::make_unique<cuda::NcclCommunicator>(rank, size, id, timeout_s);
}

NcclGradCommunicator::~NcclGradCommunicator() = default;

// The layers work on the legacy default stream (nullptr): the reduction waits for it, and returns when done.
void NcclGradCommunicator::allreduce_sum(float* device_data, int64_t n) {
  nccl_->allreduce_sum(device_data, n, nullptr);
}

void NcclGradCommunicator::weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire) {
  start_weighted_allreduce(device_grads, n, weight, wire);
  wait_all();
}

void NcclGradCommunicator::start_weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire) {
  HT_CHECK(weight >= 0.0 && weight <= 1.0, "weighted_allreduce: weight ", weight, " outside [0, 1]");

  if (weight == 0.0)
    cuda::memset_zero(device_grads, size_t(n) * sizeof(float), nullptr);  // compute stream too
  else if (weight != 1.0)
    cuda::scale(device_grads, float(weight), n, nullptr);  // on the compute stream, which NCCL waits for
  if (is_16bit(wire))
    nccl_->start_allreduce_sum_16bit(device_grads, n, wire == Wire::BF16 ? Precision::BF16 : Precision::FP16, nullptr);
  else
    nccl_->start_allreduce_sum(device_grads, n, nullptr);
}

void NcclGradCommunicator::wait_all() { nccl_->wait_started(); }

// ---------------------------------------------------------------- MPI through host memory
namespace {
class CudaHostStaging : public HostStaging {
 public:
  float* alloc(int64_t n) override { return static_cast<float*>(cuda::host_pinned_alloc(size_t(n) * sizeof(float))); }
  void release(float* host) noexcept override { cuda::host_pinned_free(host); }
  // The layers work on the legacy default stream: copies there wait for the gradients they move.
  void to_host(float* host, const float* device, int64_t n) override {
    cuda::copy_to_host(host, device, size_t(n) * sizeof(float), nullptr);
    cuda::stream_synchronize(nullptr);
  }
  void to_device(float* device, const float* host, int64_t n) override {
    cuda::copy_to_device(device, host, size_t(n) * sizeof(float), nullptr);
    cuda::stream_synchronize(nullptr);  // the host copy is reused by the next call
  }
};
}  // namespace

std::unique_ptr<HostStaging> cuda_host_staging() { return std::make_unique<CudaHostStaging>(); }

HostStagedCommunicator::HostStagedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<HostStaging> staging)
    : host_(std::move(host)), staging_(std::move(staging)),
      name_(std::string(host_->name()) + " (staged through host memory)") {}

HostStagedCommunicator::~HostStagedCommunicator() {
  for (Slot& s : slots_) staging_->release(s.host);
}

HostStagedCommunicator::Slot& HostStagedCommunicator::slot(size_t index, int64_t n) {
  if (slots_.size() <= index) slots_.resize(index + 1);
  Slot& s = slots_[index];
  if (n > s.capacity) {
    staging_->release(s.host);
    s.host = nullptr, s.capacity = 0;  // consistent even if the allocation below throws
    s.host = staging_->alloc(n);
    s.capacity = n;
  }
  return s;
}

void HostStagedCommunicator::blocking(float* device_data, int64_t n, const std::function<void(float*)>& reduce) {
  HT_CHECK(started_ == 0, "internal: a blocking reduction while started buckets are unfinished");
  Slot& s = slot(0, n);
  staging_->to_host(s.host, device_data, n);
  reduce(s.host);
  staging_->to_device(device_data, s.host, n);
}

void HostStagedCommunicator::allreduce_sum(float* device_data, int64_t n) {
  blocking(device_data, n, [&](float* host) { host_->allreduce_sum(host, n); });
}

void HostStagedCommunicator::allreduce_sum_on_wire(float* device_data, int64_t n, Wire wire) {
  blocking(device_data, n, [&](float* host) { host_->allreduce_sum_on_wire(host, n, wire); });
}

// The weight is applied on the host (the inner communicator's rule, including zero-fill for weight 0).
void HostStagedCommunicator::weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire) {
  blocking(device_grads, n, [&](float* host) { host_->weighted_allreduce(host, n, weight, wire); });
}

void HostStagedCommunicator::start_weighted_allreduce(float* device_grads, int64_t n, double weight, Wire wire) {
  Slot& s = slot(started_++, n);
  s.device = device_grads, s.n = n;
  staging_->to_host(s.host, device_grads, n);
  host_->start_weighted_allreduce(s.host, n, weight, wire);
}

void HostStagedCommunicator::wait_all() {
  const size_t started = started_;
  started_ = 0;  // free again even if the wait throws
  host_->wait_all();
  for (size_t i = 0; i < started; ++i) staging_->to_device(slots_[i].device, slots_[i].host, slots_[i].n);
}

}  // namespace hetrain::dist
