// src/cuda/memory.cpp — device and pinned allocations, copies, streams; and the device memory of core's
// tensors, installed while the program starts (core/device_memory.hpp).
#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/device_memory.hpp"
#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {

namespace {
// What device_alloc handed out and device_free has not taken back: the metrics' device_mib and
// device_peak_mib (docs/report.md). Never destroyed, since buffers may be freed during the program's exit.
struct Allocations {
  std::mutex lock;
  std::unordered_map<void*, size_t> sizes;
  DeviceMemoryUse use;
};
Allocations& allocations() {
  static Allocations* a = new Allocations;
  return *a;
}
}  // namespace

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc != cudaSuccess) {
    detail::take_last_cuda_error();  // this call's failure, reported here and not at the next launch
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    HT_THROW("cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(rc), " (", free_b >> 20, " MiB free of ",
             total_b >> 20, " MiB; hetrain holds ", device_memory_use().in_use_bytes >> 20, " MiB of it)");
  }
  Allocations& a = allocations();
  std::lock_guard<std::mutex> held(a.lock);
  a.sizes[p] = bytes;
  a.use.in_use_bytes += int64_t(bytes);
  a.use.peak_bytes = std::max(a.use.peak_bytes, a.use.in_use_bytes);
  return p;
}

// The releases below cannot throw; a failure they leave in the runtime's last-error slot is taken out
// there, or the next kernel launch would be blamed for it (check.cuh).
void device_free(void* p) noexcept {
  if (!p) return;
  {
    Allocations& a = allocations();
    std::lock_guard<std::mutex> held(a.lock);
    auto it = a.sizes.find(p);
    if (it != a.sizes.end()) {
      a.use.in_use_bytes -= int64_t(it->second);
      a.sizes.erase(it);
    }
  }
  if (cudaFree(p) != cudaSuccess) detail::take_last_cuda_error();
}

DeviceMemoryUse device_memory_use() {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> held(a.lock);
  return a.use;
}

void* host_pinned_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  HT_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void host_pinned_free(void* p) noexcept {
  if (p && cudaFreeHost(p) != cudaSuccess) detail::take_last_cuda_error();
}

void copy_to_device(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes) HT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}
void copy_to_host(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes) HT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
}
void copy_device(void* dst, const void* src, size_t bytes, CudaStream stream) {
  if (bytes) HT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}
void memset_zero(void* p, size_t bytes, CudaStream stream) {
  if (bytes) HT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
}

CudaStream stream_create() {
  cudaStream_t s = nullptr;
  HT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void stream_destroy(CudaStream s) noexcept {
  if (s && cudaStreamDestroy(s) != cudaSuccess) detail::take_last_cuda_error();
}
namespace {
// This thread's work while it waits (set_wait_hook), and whether it is running it now.
thread_local std::function<void()> t_wait_hook;
thread_local bool t_in_wait_hook = false;
}  // namespace

void set_wait_hook(std::function<void()> hook) { t_wait_hook = std::move(hook); }

void stream_synchronize(CudaStream s) {
  if (!t_wait_hook || t_in_wait_hook) {
    HT_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  for (;;) {
    const cudaError_t rc = cudaStreamQuery(s);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) HT_CUDA_CHECK(rc);
    (void)cudaGetLastError();  // "not ready" is no error: keep it from being blamed on the next launch
    t_in_wait_hook = true;
    try {
      t_wait_hook();
    } catch (...) {
      t_in_wait_hook = false;
      throw;
    }
    t_in_wait_hook = false;
    std::this_thread::yield();  // ranks may outnumber cores
  }
}
void device_synchronize() { HT_CUDA_CHECK(cudaDeviceSynchronize()); }

CudaEvent event_create() {
  cudaEvent_t e = nullptr;
  HT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}
void event_destroy(CudaEvent e) noexcept {
  if (e && cudaEventDestroy(e) != cudaSuccess) detail::take_last_cuda_error();
}
void event_record(CudaEvent e, CudaStream stream) { HT_CUDA_CHECK(cudaEventRecord(e, stream)); }
void stream_wait_event(CudaStream wait, CudaEvent e) { HT_CUDA_CHECK(cudaStreamWaitEvent(wait, e, 0)); }

// ---------------------------------------------------------------- tensor memory
// Tensors order their device work on the legacy default stream; a copy returns when it is done, so host
// code that reads a copied tensor sees finished data.
namespace {
void tensor_zero(void* p, size_t bytes) { memset_zero(p, bytes, nullptr); }

void tensor_copy(void* dst, const void* src, size_t bytes, core::CopyKind kind) {
  switch (kind) {
    case core::CopyKind::HostToDevice: copy_to_device(dst, src, bytes, nullptr); break;
    case core::CopyKind::DeviceToHost: copy_to_host(dst, src, bytes, nullptr); break;
    case core::CopyKind::DeviceToDevice: copy_device(dst, src, bytes, nullptr); break;
  }
  stream_synchronize(nullptr);
}

const core::DeviceMemory kTensorMemory{device_alloc, device_free, tensor_zero, tensor_copy};
[[maybe_unused]] const bool tensor_memory_installed = (core::install_device_memory(&kTensorMemory), true);
}  // namespace

}  // namespace hetrain::cuda
