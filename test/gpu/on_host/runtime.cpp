// test/gpu/on_host/runtime.cpp — the CUDA runtime calls hetrain makes, on host memory, for test_gpu_on_host
// and build/on-host/hetrain (docs/testing.md, "GPU tests on the host"); linked instead of libcudart. cuBLAS,
// cuDNN and NCCL are emulated beside it (cublas.cpp, cudnn.cpp, nccl.cpp).
//
// One device of 4 GiB, compute capability 9.0. Work runs when it is issued, so streams and events only need
// to exist, except where waiting matters (below). Stricter than a GPU where that catches our mistakes:
// - new device memory (up to 64 MiB an allocation) is filled with NaN bytes (a GPU leaves it undefined,
//   often zero);
// - a copy or memset must stay inside one allocation and match its stated direction; freeing an unknown
//   pointer or handle fails;
// - a stream query after new work, and a query of an event recorded after new work, say "not ready" once
//   (as a GPU busy with it would), so wait loops run;
// - an asynchronous copy from the device into pinned host memory lands only when the host has waited for it
//   (the stream, an event recorded after it, or the device), so host code that reads the buffer too early
//   reads what was there before, as it often would on a GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "runtime.hpp"

namespace hetrain::on_host {
namespace {
constexpr size_t kDeviceBytes = size_t(4) << 30;
constexpr int kComputeMajor = 9, kComputeMinor = 0;
constexpr size_t kNanFillLimit = size_t(64) << 20;

thread_local cudaError_t last_error = cudaSuccess;

struct State {
  std::mutex mutex;
  std::map<uintptr_t, size_t> device, pinned;  // allocation start → bytes
  size_t device_in_use = 0;
  std::set<void*> streams, events;
  uintptr_t handles_made = 0;  // streams and events are numbered, never reused (a freed address could be)
  std::map<void*, bool> unseen_work;  // per stream (nullptr: legacy default)
  // Copies from the device into pinned memory that have not landed yet, per stream, in order.
  struct PendingCopy {
    void* dst;
    std::vector<char> data;
  };
  std::map<void*, std::vector<PendingCopy>> pending;
  std::map<void*, void*> recorded_on;  // event → the stream it was last recorded on
  std::set<void*> events_busy;         // recorded after new work: the next query says "not ready"
  int current_device = 0;
};
State& state() {
  static State* s = new State;  // never destroyed: static destructors may still free memory
  return *s;
}

cudaError_t fail(cudaError_t e, const char* call, const char* why) {
  std::fprintf(stderr, "cuda on host: %s: %s\n", call, why);
  last_error = e;
  return e;
}

// The allocation of `m` that holds [p, p + bytes), or m.end().
std::map<uintptr_t, size_t>::const_iterator holding(const std::map<uintptr_t, size_t>& m, const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return m.end();
  --it;
  return a - it->first <= it->second && bytes <= it->second - (a - it->first) ? it : m.end();
}
bool touches_device(const State& s, const void* p) { return holding(s.device, p, 1) != s.device.end(); }

bool valid_stream(const State& s, cudaStream_t st) {
  return st == nullptr || st == cudaStreamLegacy || st == cudaStreamPerThread || s.streams.count(st) != 0;
}
void* stream_key(cudaStream_t st) { return st == cudaStreamLegacy ? nullptr : static_cast<void*>(st); }

// The host has waited for `st`: its pending copies land (the caller holds the mutex).
void land(State& s, void* st) {
  auto it = s.pending.find(st);
  if (it == s.pending.end()) return;
  for (State::PendingCopy& c : it->second) std::memcpy(c.dst, c.data.data(), c.data.size());
  s.pending.erase(it);
}
void land_all(State& s) {
  while (!s.pending.empty()) land(s, s.pending.begin()->first);
}
}  // namespace

void set_last_error(cudaError_t e) { last_error = e; }

bool usable_stream(cudaStream_t stream, const char* who) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (valid_stream(s, stream)) return true;
  std::fprintf(stderr, "cuda on host: %s: a stream that does not exist (destroyed, or never created)\n", who);
  return false;
}

bool in_device_memory(const void* p, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return holding(s.device, p, bytes) != s.device.end();
}

void note_work(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.unseen_work[stream] = true;
}

}  // namespace hetrain::on_host

using namespace hetrain::on_host;

// test/gpu/gpu_test_util.hpp: tests that need cuDNN, cuBLAS or NCCL skip themselves where this is defined.
extern "C" int hetrain_cuda_runs_on_host() { return 1; }

// ---------------------------------------------------------------- errors and versions
cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "an error the host runtime does not name";
  }
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

// ---------------------------------------------------------------- devices
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = state().current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaSetDevice", "the host runtime has device 0 only");
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties", "the host runtime has device 0 only");
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "CUDA on the host (hetrain test emulation)");
  for (int i = 0; i < 16; ++i) prop->uuid.bytes[i] = char(0x40 + i);
  prop->totalGlobalMem = kDeviceBytes;
  prop->major = kComputeMajor;
  prop->minor = kComputeMinor;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 * 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  land_all(s);
  for (auto& stream : s.unseen_work) stream.second = false;
  return cudaSuccess;
}

// ---------------------------------------------------------------- memory
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *free_bytes = kDeviceBytes - s.device_in_use;
  *total_bytes = kDeviceBytes;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *p = nullptr;
  if (bytes > kDeviceBytes - s.device_in_use) return fail(cudaErrorMemoryAllocation, "cudaMalloc", "out of the 4 GiB");
  void* q = nullptr;
  if (posix_memalign(&q, 256, bytes ? bytes : 1) != 0) return fail(cudaErrorMemoryAllocation, "cudaMalloc", "no host memory");
  // NaN in every float, so that a kernel that reads what nobody wrote shows it (not in workspaces and the
  // allocations of tests that take most of the device: touching that much host memory only costs time)
  if (bytes <= kNanFillLimit) std::memset(q, 0xff, bytes);
  s.device[reinterpret_cast<uintptr_t>(q)] = bytes;
  s.device_in_use += bytes;
  *p = q;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.device.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.device.end()) return fail(cudaErrorInvalidValue, "cudaFree", "not the start of a device allocation");
  land_all(s);  // cudaFree waits for the device
  s.device_in_use -= it->second;
  s.device.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return fail(cudaErrorMemoryAllocation, "cudaMallocHost", "no host memory");
  s.pinned[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  land_all(s);  // cudaFreeHost waits for the device
  if (!s.pinned.erase(reinterpret_cast<uintptr_t>(p)))
    return fail(cudaErrorInvalidValue, "cudaFreeHost", "not a pinned allocation");
  std::free(p);
  return cudaSuccess;
}

namespace {
cudaError_t copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st,
               bool async) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!valid_stream(s, st)) return fail(cudaErrorInvalidResourceHandle, call, "unknown stream");
    const bool dst_dev = touches_device(s, dst), src_dev = touches_device(s, src);
    bool dst_ok = true, src_ok = true;
    switch (kind) {
      case cudaMemcpyHostToDevice: dst_ok = dst_dev, src_ok = !src_dev; break;
      case cudaMemcpyDeviceToHost: dst_ok = !dst_dev, src_ok = src_dev; break;
      case cudaMemcpyDeviceToDevice: dst_ok = dst_dev, src_ok = src_dev; break;
      case cudaMemcpyHostToHost: dst_ok = !dst_dev, src_ok = !src_dev; break;
      default: break;
    }
    if (!dst_ok || !src_ok) return fail(cudaErrorInvalidValue, call, "a pointer on the wrong side for the copy's kind");
    if ((dst_dev && holding(s.device, dst, bytes) == s.device.end()) ||
        (src_dev && holding(s.device, src, bytes) == s.device.end()))
      return fail(cudaErrorInvalidValue, call, "the copy runs past the end of its device allocation");
    const char *d = static_cast<const char*>(dst), *r = static_cast<const char*>(src);
    if (bytes && d < r + bytes && r < d + bytes)
      return fail(cudaErrorInvalidValue, call, "source and destination overlap (undefined on a GPU)");
    // Into pinned memory, asynchronously: lands when the host waits (see the file's header). Into pageable
    // memory the runtime returns only once the copy is done.
    if (async && src_dev && !dst_dev && holding(s.pinned, dst, bytes) != s.pinned.end()) {
      s.pending[stream_key(st)].push_back({dst, std::vector<char>(r, r + bytes)});
      return cudaSuccess;
    }
    // What reads host memory comes after the stream's earlier copies into it (and a synchronous copy runs
    // on the legacy stream).
    if (!src_dev) land(s, stream_key(st));
    std::memcpy(dst, src, bytes);
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, bytes, kind, nullptr, false);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st) {
  const cudaError_t e = copy("cudaMemcpyAsync", dst, src, bytes, kind, st, true);
  if (e == cudaSuccess) note_work(st);
  return e;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t st) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!valid_stream(s, st)) return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync", "unknown stream");
    if (holding(s.device, p, bytes) == s.device.end())
      return fail(cudaErrorInvalidValue, "cudaMemsetAsync", "not inside one device allocation");
  }
  std::memset(p, value, bytes);
  note_work(st);
  return cudaSuccess;
}

// ---------------------------------------------------------------- streams and events
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned int) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *st = reinterpret_cast<cudaStream_t>(++s.handles_made * 64);
  s.streams.insert(*st);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.erase(st)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy", "unknown stream");
  s.unseen_work.erase(st);
  land(s, st);  // its work still completes
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(s, st)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize", "unknown stream");
  s.unseen_work[st] = false;
  land(s, stream_key(st));
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t st) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(s, st)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery", "unknown stream");
  bool& unseen = s.unseen_work[st];
  if (!unseen) {
    land(s, stream_key(st));
    return cudaSuccess;
  }
  unseen = false;
  last_error = cudaErrorNotReady;  // as the runtime does: the caller must clear it
  return cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(s, st) || !s.events.count(e))
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent", "unknown stream or event");
  if (auto it = s.recorded_on.find(e); it != s.recorded_on.end()) land(s, it->second);  // ordered after it
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *e = reinterpret_cast<cudaEvent_t>(++s.handles_made * 64);
  s.events.insert(*e);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.events.erase(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy", "unknown event");
  s.recorded_on.erase(e);
  s.events_busy.erase(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(s, st) || !s.events.count(e))
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord", "unknown stream or event");
  s.recorded_on[e] = stream_key(st);
  auto work = s.unseen_work.find(st);
  if (work != s.unseen_work.end() && work->second) s.events_busy.insert(e);
  else s.events_busy.erase(e);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery", "unknown event");
  if (s.events_busy.erase(e)) {
    last_error = cudaErrorNotReady;  // as for a stream: the caller must clear it
    return cudaErrorNotReady;
  }
  if (auto it = s.recorded_on.find(e); it != s.recorded_on.end()) land(s, it->second);
  return cudaSuccess;
}
