// test/gpu/device_test.cpp — device queries, selection, memory round trips, and the CPU-build stubs.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "gpu_test_util.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;

// Runs everywhere: the count and the status line must tell the same story.
TEST(CudaDevice, CountAgreesWithStatus) {
  const int n = cuda_device_count();
  ASSERT_GE(n, 0);
  const std::string status = cuda_status();
  if (n == 0) {
    EXPECT_EQ(status.rfind("no CUDA device", 0), 0u) << status;
  } else {
    EXPECT_NE(status.find("CUDA device"), std::string::npos) << status;
  }
  if (!cuda_built()) {
    EXPECT_EQ(n, 0);
  }
}

// Runs where no GPU answers: asking for one is a clear error, not a crash or a silent CPU run.
TEST(CudaDevice, SelectWithoutGpuIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    cuda_select_device(0);
    FAIL() << "cuda_select_device succeeded without a GPU";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("no CUDA device") != std::string::npos || msg.find("built without CUDA") != std::string::npos)
        << msg;
  }
}

// Runs in the CPU-only build: every backend entry point fails loudly.
TEST(CudaDevice, CpuBuildStubsThrow) {
  if (cuda_built()) GTEST_SKIP() << "CUDA build: the stubs are not linked";
  auto expect_no_cuda = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << " did not throw in a CPU-only build";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA: rebuild with CUDA=1"), std::string::npos) << e.what();
    }
  };
  expect_no_cuda([] { cuda::device_alloc(16); }, "device_alloc");
  expect_no_cuda([] { cuda_device_info(0); }, "cuda_device_info");
  expect_no_cuda([] { cuda::add_forward(nullptr, nullptr, nullptr, 1, nullptr); }, "add_forward");
  expect_no_cuda([] { cuda::nccl_unique_id(); }, "nccl_unique_id");
  expect_no_cuda([] { cuda::CudnnConv2d conv(Conv2dGeom{}); }, "CudnnConv2d");
}

// Runs in the CUDA build even without a GPU: NCCL makes ids from the host alone.
TEST(CudaDevice, NcclUniqueIdWithoutGpu) {
  if (!cuda_built()) GTEST_SKIP() << "built without CUDA";
  const cuda::NcclIdBytes a = cuda::nccl_unique_id(), b = cuda::nccl_unique_id();
  int nonzero = 0;
  for (char c : a) nonzero += c != 0;
  EXPECT_GT(nonzero, 0);
  EXPECT_NE(a, b) << "two unique ids are equal";
}

TEST(CudaDevice, InfoAndSelection) {
  HT_REQUIRE_GPU();
  const int n = cuda_device_count();
  for (int i = 0; i < n; ++i) {
    const CudaDeviceInfo info = cuda_device_info(i);
    EXPECT_EQ(info.index, i);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_bytes, 0u);
    EXPECT_LE(info.free_bytes, info.total_bytes);
    EXPECT_GE(info.cc_major, 3);
    EXPECT_EQ(info.uuid.rfind("GPU-", 0), 0u) << info.uuid;  // compared across ranks (gpu_sharing_error)
    EXPECT_EQ(info.uuid.size(), 40u) << info.uuid;
    std::cout << "device " << i << ": " << info.name << ", " << (info.total_bytes >> 20) << " MiB ("
              << (info.free_bytes >> 20) << " free), sm_" << info.cc_major << info.cc_minor << "\n";
  }
  EXPECT_EQ(cuda_select_device(n + 1), (n + 1) % n);  // local rank wraps around the node's GPUs
  EXPECT_EQ(cuda_select_device(0), 0);
  EXPECT_THROW(cuda_device_info(n), Error);
  EXPECT_THROW(cuda_select_device(-1), Error);
}

TEST(CudaMemory, RoundTripOnAStream) {
  HT_REQUIRE_GPU();
  const size_t n = 1001;
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 0.5f);
  cuda::DeviceBuffer<float> a(n), b(n);
  a.upload(host);
  CudaStream s = cuda::stream_create();
  float* pinned = static_cast<float*>(cuda::host_pinned_alloc(n * sizeof(float)));
  cuda::copy_device(b.data(), a.data(), n * sizeof(float), s);
  cuda::copy_to_host(pinned, b.data(), n * sizeof(float), s);
  cuda::stream_synchronize(s);
  EXPECT_EQ(std::vector<float>(pinned, pinned + n), host);
  cuda::memset_zero(b.data(), n * sizeof(float), s);
  cuda::stream_synchronize(s);
  EXPECT_EQ(b.download(), std::vector<float>(n, 0.0f));
  cuda::host_pinned_free(pinned);
  cuda::stream_destroy(s);
  cuda::DeviceBuffer<float> moved = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(moved.download(), host);
}

// The metrics' device_mib and device_peak_mib (docs/report.md) count what device_alloc hands out: a
// tensor-sized buffer raises both by its size, and freeing it lowers only the first.
TEST(CudaMemory, UseFollowsAllocationsAndKeepsThePeak) {
  HT_REQUIRE_GPU();
  const cuda::DeviceMemoryUse before = cuda::device_memory_use();
  EXPECT_GE(before.peak_bytes, before.in_use_bytes);
  constexpr size_t kBytes = size_t(48) << 20;
  void* p = cuda::device_alloc(kBytes);
  const cuda::DeviceMemoryUse held = cuda::device_memory_use();
  EXPECT_EQ(held.in_use_bytes, before.in_use_bytes + int64_t(kBytes));
  EXPECT_GE(held.peak_bytes, held.in_use_bytes);
  cuda::device_free(p);
  const cuda::DeviceMemoryUse after = cuda::device_memory_use();
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.peak_bytes, held.peak_bytes);
  cuda::device_free(nullptr);  // no effect on the counts
  EXPECT_EQ(cuda::device_memory_use().in_use_bytes, before.in_use_bytes);
}

// A CPU-only build has no device memory to count: zeros, not an error (every CPU rank reports them).
TEST(CudaMemory, UseIsZeroWithoutCuda) {
  if (cuda_built()) GTEST_SKIP() << "a CUDA build";
  const cuda::DeviceMemoryUse use = cuda::device_memory_use();
  EXPECT_EQ(use.in_use_bytes, 0);
  EXPECT_EQ(use.peak_bytes, 0);
}

// cuda::set_wait_hook: while a stream's work runs, stream_synchronize runs the calling thread's hook (the
// elastic modes' MPI progress) instead of blocking, never inside the hook itself, and waits for the work all
// the same; another thread's waits do not run it; an empty hook restores the plain wait.
TEST(CudaMemory, WaitHookRunsWhileTheStreamWorks) {
  HT_REQUIRE_GPU();
  // On the host emulation (test_gpu_on_host) every launch completes at once and a query after new work
  // answers "not ready" once, so a small buffer shows the same; the GPU needs milliseconds of work.
  const int64_t n = int64_t(1) << (gpu_test::cuda_runs_on_host() ? 14 : 22);
  cuda::DeviceBuffer<float> d(static_cast<size_t>(n));
  d.upload(std::vector<float>(size_t(n), 1.0f));
  CudaStream s = cuda::stream_create();
  // 400 passes over 16 MB, each doubling undone by the next halving (exact in float): milliseconds of
  // work, so the first poll finds it running.
  auto slow_work = [&] {
    for (int k = 0; k < 200; ++k) {
      cuda::accumulate(d.data(), d.data(), n, s);
      cuda::scale(d.data(), 0.5f, n, s);
    }
  };
  int calls = 0, returned = 0;
  cuda::set_wait_hook([&] {
    ++calls;
    cuda::stream_synchronize(s);  // a wait inside the hook is a plain wait, not another round of the hook
    ++returned;
  });
  slow_work();
  cuda::stream_synchronize(s);
  EXPECT_GE(calls, 1) << "the hook never ran while the stream worked";
  EXPECT_EQ(returned, calls);
  const int calls_here = calls;
  slow_work();
  std::thread other([&] { cuda::stream_synchronize(s); });  // not this thread's hook
  other.join();
  EXPECT_EQ(calls, calls_here);
  cuda::set_wait_hook(nullptr);
  slow_work();
  cuda::stream_synchronize(s);
  EXPECT_EQ(calls, calls_here);
  const std::vector<float> back = d.download();
  EXPECT_EQ(back.front(), 1.0f);
  EXPECT_EQ(back.back(), 1.0f);
  cuda::stream_destroy(s);
}
