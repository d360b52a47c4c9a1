// test/gpu/nccl_bench_test.cpp — the NCCL allreduce figure of `make gpu-check`: an in-place allreduce of
// 25M floats (ResNet-50's gradient, 100 MB) on one rank, timed on the host around allreduce_sum (which
// returns when the reduction has finished). 5 untimed warm-up calls, then 20 timed ones.
//
// Figures as nccl-tests defines them: algbw = bytes / time; busbw = algbw · 2(n-1)/n for allreduce, which
// is 0 on one rank (nothing crosses a link), so the one-rank figure to read is algbw. Printed as a RESULT
// line and, when HETRAIN_GPU_RESULTS names a file, appended to it. Nothing is asserted about time; the
// test fails only if the reduction is wrong (on one rank the sum is the buffer itself, exactly).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpu_test_util.hpp"

using namespace hetrain;

TEST(NcclBench, AllreduceBusBandwidth25M) {
  HT_REQUIRE_GPU();
  const int device = cuda_select_device(0);
  const CudaDeviceInfo info = cuda_device_info(device);
  const int ranks = 1, warmup = 5, iters = 20;
  const int64_t n = 25'000'000;
  const double bytes = double(n) * sizeof(float);

  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[size_t(i)] = float(i % 1000) * 0.25f - 100.0f;  // exact in float
  cuda::DeviceBuffer<float> buf(static_cast<size_t>(n));
  buf.upload(host);
  cuda::NcclCommunicator comm(0, ranks, cuda::nccl_unique_id(), 120.0);

  for (int i = 0; i < warmup; ++i) comm.allreduce_sum(buf.data(), n);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) comm.allreduce_sum(buf.data(), n);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;

  const double algbw = bytes / seconds / 1e9;  // GB/s
  const double bus_factor = 2.0 * (ranks - 1) / ranks;
  const double busbw = algbw * bus_factor;
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(3);
  line << "RESULT nccl_allreduce_25M device=\"" << info.name << "\" ranks=" << ranks << " floats=" << n
       << " bytes=" << int64_t(bytes) << " time_ms=" << seconds * 1e3 << " algbw_GBps=" << algbw
       << " busbw_GBps=" << busbw << " note=\"busbw factor 2(n-1)/n = " << bus_factor
       << " on one rank: read algbw\"";
  std::cout << line.str() << std::endl;
  if (const char* path = std::getenv("HETRAIN_GPU_RESULTS"); path && *path) {
    std::ofstream f(path, std::ios::app);
    EXPECT_TRUE(f.good()) << "HETRAIN_GPU_RESULTS=" << path << ": cannot open for appending";
    f << line.str() << "\n";
  }

  EXPECT_GT(seconds, 0.0);
  // One rank: 25 in-place sums later the buffer is unchanged. Compare every 997th element (the whole
  // buffer would be 100 MB more to copy back).
  const auto got = buf.download();
  std::vector<float> got_s, ref_s;
  for (int64_t i = 0; i < n; i += 997) got_s.push_back(got[size_t(i)]), ref_s.push_back(host[size_t(i)]);
  gpu_test::expect_close("allreduce result", got_s, ref_s, 0, 0);
}
