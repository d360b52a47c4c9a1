// test/gpu/nccl_bench_test.cpp — the NCCL allreduce figure of `make gpu-check`: an in-place sum-allreduce of
// 25M floats (ResNet-50's gradient, 100 MB), timed on the host around allreduce_sum (which returns when the
// reduction has finished). 5 untimed warm-up calls, then 20 timed ones.
//
// With two GPUs or more, one rank per GPU (a power of two of them, at most 8), each driven by its own thread
// in this one process, as NCCL allows. Figures as nccl-tests defines them: algbw = bytes / time, busbw =
// algbw · 2(n-1)/n for allreduce; the slowest rank's time counts. With ONE GPU there is nothing to measure:
// an allreduce over one rank moves no data (NCCL returns or copies in place), so its time is per-call
// overhead, not a bandwidth. That RESULT line says so and carries no bandwidth fields.
//
// The figure is printed as a RESULT line and, when HETRAIN_GPU_RESULTS names a file, appended to it. Nothing
// is asserted about time; the test fails only if the reduction is wrong: every rank starts from the same
// buffer of multiples of 1/4, so each sum multiplies it by the rank count, a power of two, exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gpu_test_util.hpp"

using namespace hetrain;

namespace {
// Every thread waits here until all have arrived, once (std::barrier is C++20). Atomics, not a
// condition variable: GCC 12's condition_variable::wait needs GLIBCXX_3.4.30, which RHEL 9's libstdc++
// lacks, and this binary runs there from a bundle (scripts/gpu-bundle.sh).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    ++arrived_;
    while (arrived_.load() < n_) std::this_thread::yield();
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
};

struct RankResult {
  double seconds = 0;           // per timed call
  std::vector<float> sample;    // every 997th element after all calls
  std::string error;
};
}  // namespace

TEST(NcclBench, AllreduceBusBandwidth25M) {
  HT_REQUIRE_REAL_GPU("a bandwidth measurement");
  const int gpus = cuda_device_count();
  int ranks = 1;
  while (ranks * 2 <= std::min(gpus, 8)) ranks *= 2;
  const int warmup = 5, iters = 20;
  const int64_t n = 25'000'000;
  const double bytes = double(n) * sizeof(float);
  const CudaDeviceInfo info = cuda_device_info(0);

  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[size_t(i)] = float(i % 1000) * 0.25f - 100.0f;  // exact in float
  const cuda::NcclIdBytes id = cuda::nccl_unique_id();
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  Barrier barrier(ranks);
  auto run_rank = [&](int rank) {
    RankResult& r = results[size_t(rank)];
    bool at_barrier = false;
    try {
      cuda_select_device(rank);  // this thread's device: GPU `rank`
      cuda::DeviceBuffer<float> buf(static_cast<size_t>(n));
      buf.upload(host);
      cuda::NcclCommunicator comm(rank, ranks, id, 120.0);  // returns once every rank has joined
      for (int i = 0; i < warmup; ++i) comm.allreduce_sum(buf.data(), n);
      at_barrier = true;
      barrier.wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) comm.allreduce_sum(buf.data(), n);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      const auto got = buf.download();  // the whole buffer is 100 MB: compare every 997th element
      for (int64_t i = 0; i < n; i += 997) r.sample.push_back(got[size_t(i)]);
    } catch (const std::exception& e) {
      r.error = e.what();
      // The others wait there (after their own NCCL timeouts, if this rank's failure stalled them).
      if (!at_barrier) barrier.wait();
    }
  };
  if (ranks == 1) {
    run_rank(0);
  } else {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank) threads.emplace_back(run_rank, rank);
    for (auto& t : threads) t.join();
  }
  for (int rank = 0; rank < ranks; ++rank)
    ASSERT_EQ(results[size_t(rank)].error, "") << "NCCL rank " << rank << " of " << ranks;

  double seconds = 0;
  for (const RankResult& r : results) seconds = std::max(seconds, r.seconds);
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(3);
  line << "RESULT nccl_allreduce_25M device=\"" << info.name << "\" ranks=" << ranks << " floats=" << n
       << " bytes=" << int64_t(bytes) << " time_ms=" << seconds * 1e3;
  if (ranks >= 2) {
    const double algbw = bytes / seconds / 1e9;  // GB/s
    const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
    line << " algbw_GBps=" << algbw << " busbw_GBps=" << busbw;
  } else {
    line << " note=\"one GPU, one rank: the allreduce moves no data, so this time is NCCL's per-call overhead, "
            "not a bandwidth (a bus bandwidth needs two GPUs or more)\"";
  }
  std::cout << line.str() << std::endl;
  if (const char* path = std::getenv("HETRAIN_GPU_RESULTS"); path && *path) {
    std::ofstream f(path, std::ios::app);
    EXPECT_TRUE(f.good()) << "HETRAIN_GPU_RESULTS=" << path << ": cannot open for appending";
    f << line.str() << "\n";
  }

  EXPECT_GT(seconds, 0.0);
  // warmup + iters sums, each multiplying by `ranks` (a power of two: exact, and far from overflow).
  std::vector<float> ref;
  for (int64_t i = 0; i < n; i += 997) {
    float v = host[size_t(i)];
    for (int k = 0; k < warmup + iters; ++k) v *= float(ranks);
    ref.push_back(v);
  }
  for (int rank = 0; rank < ranks; ++rank)
    gpu_test::expect_close("allreduce result of rank " + std::to_string(rank), results[size_t(rank)].sample, ref, 0, 0);
}
