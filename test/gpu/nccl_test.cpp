// test/gpu/nccl_test.cpp — the NCCL communicator on one GPU (one rank: the sum is the buffer itself, so
// the result must be exact). The distributed tests under MPI reduce on the CPU, not through NCCL: a
// multi-rank NCCL reduction runs only on machines with two GPUs or more (NcclBench in nccl_bench_test.cpp,
// one rank per GPU in one process, checks its sums; test/e2e/train_gpu.sh trains on two GPU ranks).
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "twins.hpp"

using namespace hetrain;

TEST(CudaNccl, SingleRankAllreduceIsIdentity) {
  HT_REQUIRE_GPU();
  cuda_select_device(0);
  cuda::NcclCommunicator comm(0, 1, cuda::nccl_unique_id(), 60.0);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  const int64_t n = 1000003;
  auto x = gpu_test::random_floats(n, 9);
  cuda::DeviceBuffer<float> d(n);
  d.upload(x);
  // A slow producer on another stream: 64 doublings, each a pass over 4 MB, then 64 halvings by 0.5.
  // Only the reduction's own stream is synchronised before reading, so a reduction that did not wait for the
  // producer would run in the middle of them and its result would show a power of two.
  CudaStream producer = cuda::stream_create();
  for (int k = 0; k < 64; ++k) cuda::accumulate(d.data(), d.data(), n, producer);
  for (int k = 0; k < 64; ++k) cuda::scale(d.data(), 0.5f, n, producer);
  cuda::accumulate(d.data(), d.data(), n, producer);  // the final 2x
  comm.start_allreduce_sum(d.data(), n, producer);
  std::vector<float> got(static_cast<size_t>(n));
  cuda::copy_to_host(got.data(), d.data(), got.size() * sizeof(float), comm.stream());
  cuda::stream_synchronize(comm.stream());
  comm.wait_started();
  for (auto& v : x) v *= 2;
  gpu_test::expect_close("allreduce", got, x, 0, 0);
  cuda::stream_synchronize(producer);
  cuda::stream_destroy(producer);
  EXPECT_THROW(comm.allreduce_sum(d.data(), -1), Error);
}

TEST(CudaNccl, BadRankIsRejected) {
  HT_REQUIRE_GPU();
  EXPECT_THROW(cuda::NcclCommunicator(2, 2, cuda::nccl_unique_id()), Error);
}

// --reduce-precision on NCCL: one rank's sum is its own value rounded to 16 bits and widened, the same bits
// as the CPU twin of the cast (which the MPI path's conversion matches, test/dist/wire_test.cpp), for both
// formats and for two buckets in flight.
TEST(CudaNccl, SixteenBitWireMatchesTheCpuRounding) {
  HT_REQUIRE_GPU();
  cuda_select_device(0);
  cuda::NcclCommunicator comm(0, 1, cuda::nccl_unique_id(), 60.0);
  const int64_t n = 100003;
  const auto x = gpu_test::random_floats(n, 11);
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    cuda::DeviceBuffer<float> a(n), b(n);
    a.upload(x);
    b.upload(x);
    comm.start_allreduce_sum_16bit(a.data(), n, p);
    comm.start_allreduce_sum_16bit(b.data(), n, p);
    comm.wait_started();
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[size_t(i)] = gpu_test::round_to_16bit_twin(x[size_t(i)], p);
    gpu_test::expect_close(precision_name(p), a.download(), want, 0, 0);
    gpu_test::expect_close(precision_name(p), b.download(), want, 0, 0);
  }
  EXPECT_THROW(comm.start_allreduce_sum_16bit(nullptr, 4, Precision::TF32), Error);
}
