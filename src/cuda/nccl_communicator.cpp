// src/cuda/nccl_communicator.cpp — sum-allreduce of device buffers through NCCL, with error polling.
//
// The communicator is non-blocking (ncclConfig_t.blocking = 0): every NCCL call returns at once and this
// class waits by polling, checking ncclCommGetAsyncError each time. A peer that died or a network error
// then turns into an exception (after ncclCommAbort) instead of a rank hanging forever in a collective.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclIdBytes), "NcclIdBytes must hold an ncclUniqueId");

NcclIdBytes nccl_unique_id() {
  ncclUniqueId id;
  HT_NCCL_CHECK(ncclGetUniqueId(&id));
  NcclIdBytes bytes;
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  int rank = 0, size = 1;
  double timeout_s = 600.0;
  bool aborted = false;
  // 16-bit wire buffers, one per bucket started since the last wait_started (they are in flight together);
  // kept and grown across steps. A buffer is replaced only when idle: every use ended at a wait_started.
  struct WireBuffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<WireBuffer> wire_buffers;
  size_t wire_in_use = 0;

  void* wire_buffer(size_t bytes) {
    if (wire_in_use == wire_buffers.size()) wire_buffers.emplace_back();
    WireBuffer& b = wire_buffers[wire_in_use++];
    if (b.bytes < bytes) {
      device_free(b.data);
      b = WireBuffer{};  // consistent if the allocation below throws
      b.data = device_alloc(bytes);
      b.bytes = bytes;
    }
    return b.data;
  }

  // Wait until `finished()` is true, polling NCCL's asynchronous error state; abort and throw on an error
  // or after timeout_s.
  template <typename Finished>
  void wait(const char* what, Finished finished) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (int spins = 0;; ++spins) {
      ncclResult_t async = ncclSuccess;
      HT_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
      if (async != ncclSuccess && async != ncclInProgress) fail(what, ncclGetErrorString(async));
      if (async == ncclSuccess && finished()) return;
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (waited > timeout_s)
        fail(what, ("still not finished after " + std::to_string(waited) + " s (a peer may be gone)").c_str());
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  [[noreturn]] void fail(const char* what, const char* why) {
    if (!aborted) {
      ncclCommAbort(comm);
      aborted = true;
    }
    HT_THROW("NCCL ", what, " failed on NCCL rank ", rank, " of ", size, ": ", why);
  }
};

NcclCommunicator::NcclCommunicator(int rank, int size, const NcclIdBytes& id_bytes, double timeout_s)
    : impl_(new Impl) {
  HT_CHECK(size >= 1 && rank >= 0 && rank < size, "NCCL communicator: bad rank ", rank, " of ", size);
  HT_CHECK(timeout_s > 0, "NCCL communicator: timeout must be positive");
  Impl& m = *impl_;
  m.rank = rank, m.size = size, m.timeout_s = timeout_s;
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // A constructor that throws runs no destructor: whatever was made before the failure is released here
  // (an aborted communicator, its stream and events), then the error goes on.
  try {
    HT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
    HT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ready, cudaEventDisableTiming));
    HT_CUDA_CHECK(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
    HT_NCCL_CHECK(ncclCommInitRankConfig(&m.comm, size, id, rank, &config));
    m.wait("communicator set-up", [] { return true; });
  } catch (...) {
    if (m.comm) {
      if (!m.aborted) ncclCommAbort(m.comm);
      m.aborted = true;
    }
    if (m.ready) cudaEventDestroy(m.ready);
    if (m.done) cudaEventDestroy(m.done);
    if (m.stream) cudaStreamDestroy(m.stream);
    detail::take_last_cuda_error();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  if (m.comm) {
    if (!m.aborted) {
      // Finalize is non-blocking here; give it a bounded time (~10 s), then destroy regardless.
      ncclResult_t st = ncclCommFinalize(m.comm);
      for (int i = 0; i < 200000 && st == ncclInProgress; ++i) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (ncclCommGetAsyncError(m.comm, &st) != ncclSuccess) break;
      }
      ncclCommDestroy(m.comm);
    }
  }
  for (Impl::WireBuffer& b : m.wire_buffers) device_free(b.data);
  if (m.ready) cudaEventDestroy(m.ready);
  if (m.done) cudaEventDestroy(m.done);
  if (m.stream) cudaStreamDestroy(m.stream);
  // Whatever the unchecked calls above (NCCL's included) left in the runtime's last-error slot belongs to
  // this teardown, not to the next kernel launch (check.cuh).
  detail::take_last_cuda_error();
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
CudaStream NcclCommunicator::stream() const { return impl_->stream; }

void NcclCommunicator::allreduce_sum(float* dev, int64_t n, CudaStream after) {
  start_allreduce_sum(dev, n, after);
  wait_started();
}

void NcclCommunicator::start_allreduce_sum(float* dev, int64_t n, CudaStream after) {
  Impl& m = *impl_;
  HT_CHECK(!m.aborted, "NCCL communicator was aborted by an earlier error");
  HT_CHECK(n >= 0, "allreduce_sum: negative size ", n);
  if (n == 0) return;
  HT_CHECK(dev, "allreduce_sum: null buffer");
  // The reduction must see the finished gradients: order our stream after the producer's work so far.
  // Re-recording `ready` for the next bucket is safe: a stream wait captures the event as it is now.
  HT_CUDA_CHECK(cudaEventRecord(m.ready, after));
  HT_CUDA_CHECK(cudaStreamWaitEvent(m.stream, m.ready, 0));
  HT_NCCL_CHECK(ncclAllReduce(dev, dev, size_t(n), ncclFloat, ncclSum, m.comm, m.stream));
  m.wait("allreduce enqueue", [] { return true; });  // a non-blocking communicator: enqueued only now
}

void NcclCommunicator::start_allreduce_sum_16bit(float* dev, int64_t n, Precision wire, CudaStream after) {
  Impl& m = *impl_;
  HT_CHECK(!m.aborted, "NCCL communicator was aborted by an earlier error");
  HT_CHECK(is_16bit(wire), "allreduce_sum_16bit: ", precision_name(wire), " is not a 16-bit format");
  HT_CHECK(n >= 0, "allreduce_sum: negative size ", n);
  if (n == 0) return;
  HT_CHECK(dev, "allreduce_sum: null buffer");
  void* half = m.wire_buffer(size_t(n) * 2);
  HT_CUDA_CHECK(cudaEventRecord(m.ready, after));
  HT_CUDA_CHECK(cudaStreamWaitEvent(m.stream, m.ready, 0));
  cast_to_16bit(half, dev, n, wire, m.stream);
  HT_NCCL_CHECK(ncclAllReduce(half, half, size_t(n), wire == Precision::BF16 ? ncclBfloat16 : ncclFloat16, ncclSum,
                              m.comm, m.stream));
  m.wait("allreduce enqueue", [] { return true; });
  cast_from_16bit(dev, half, n, wire, m.stream);
}

void NcclCommunicator::wait_started() {
  Impl& m = *impl_;
  HT_CHECK(!m.aborted, "NCCL communicator was aborted by an earlier error");
  HT_CUDA_CHECK(cudaEventRecord(m.done, m.stream));
  m.wait("allreduce", [&] {
    cudaError_t q = cudaEventQuery(m.done);
    if (q == cudaErrorNotReady) return false;
    // A failed stream leaves NCCL's collective hanging on the other ranks: abort it, as for NCCL's errors.
    if (q != cudaSuccess) m.fail("allreduce", cudaGetErrorString(q));
    return true;
  });
  m.wire_in_use = 0;  // every bucket's 16-bit buffer is free again
}

}  // namespace hetrain::cuda
