// test/gpu/on_host/emulation_test.cu — what test_gpu_on_host's CUDA on the host promises (cuda_on_host.hpp,
// grid.cpp, runtime.cpp): barriers and shuffles as a GPU runs them, loud failures where a GPU would hang or
// fault, and a runtime stricter than a GPU's. Built only into test_gpu_on_host, through the same launch
// rewrite as kernels/*.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// One block sums its 256 values: warp shuffles, then a barrier, then warp 0 over the warps' sums.
__global__ void block_sum_kernel(float* out, const float* in) {
  __shared__ float partial[8];
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < 8 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
  }
}

// Each thread reads its right neighbour's value from shared memory, with or without the barrier between
// the writes and the reads.
template <bool kBarrier>
__global__ void neighbour_kernel(int* out) {
  __shared__ int slots[64];
  slots[threadIdx.x] = int(threadIdx.x);
  if (kBarrier) __syncthreads();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

__global__ void early_return_kernel(int* out) {
  if (threadIdx.x == 0) return;  // thread 0 never reaches the barrier below
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void barrier_from_block_one_kernel(int* out) {
  if (blockIdx.x >= 1) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

__global__ void grid_stride_kernel(int* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] += 1;
}

template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}
template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(CudaOnHost, BarriersAndShufflesSumABlock) {
  std::vector<float> in(3 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 97);
  float* d_in = device_alloc<float>(in.size());
  float* d_out = device_alloc<float>(3);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  block_sum_kernel<<<3, 256>>>(d_out, d_in);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> out = download(d_out, 3);
  for (int b = 0; b < 3; ++b) {
    float want = 0;
    for (int i = 0; i < 256; ++i) want += in[size_t(b * 256 + i)];
    EXPECT_EQ(out[size_t(b)], want) << "block " << b;
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(CudaOnHost, AMissingBarrierShows) {
  int* d = device_alloc<int>(64);
  neighbour_kernel<true><<<1, 64>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> with = download(d, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(with[size_t(t)], (t + 1) % 64);
  // Without the barrier each thread runs to its end before the next starts, so a read finds its neighbour's
  // slot not yet written: the wrong values a GPU would give only sometimes, every time.
  neighbour_kernel<false><<<1, 64>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> without = download(d, 64);
  int wrong = 0;
  for (int t = 0; t < 64; ++t) wrong += without[size_t(t)] != (t + 1) % 64;
  EXPECT_GT(wrong, 0);
  cudaFree(d);
}

TEST(CudaOnHost, ABarrierSomeThreadsNeverReachFailsTheLaunch) {
  int* d = device_alloc<int>(64);
  early_return_kernel<<<1, 64>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error is taken once";
  barrier_from_block_one_kernel<<<2, 32>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << "blocks that differ in reaching a barrier are not emulated";
  cudaFree(d);
}

TEST(CudaOnHost, InvalidConfigurationsFail) {
  int* d = device_alloc<int>(1);
  grid_stride_kernel<<<0, 256>>>(d, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  grid_stride_kernel<<<1, 2048>>>(d, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  grid_stride_kernel<<<1, 32, 64 * 1024>>>(d, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cudaFree(d);
}

TEST(CudaOnHost, AHostPointerOrADestroyedStreamFailsTheLaunch) {
  std::vector<int> host(8, 0);
  grid_stride_kernel<<<1, 32>>>(host.data(), 8);  // a GPU would fault on this address
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(host[0], 0) << "the kernel must not have run";
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  int* d = device_alloc<int>(8);
  grid_stride_kernel<<<1, 32, 0, s>>>(d, 8);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cudaFree(d);
}

TEST(CudaOnHost, GridStrideLoopsCoverEveryElementOnce) {
  const int64_t n = 100003;
  int* d = device_alloc<int>(size_t(n));
  ASSERT_EQ(cudaMemsetAsync(d, 0, size_t(n) * sizeof(int), nullptr), cudaSuccess);
  grid_stride_kernel<<<7, 96>>>(d, n);  // far fewer threads than elements
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> out = download(d, size_t(n));
  int64_t wrong = 0;
  for (int v : out) wrong += v != 1;
  EXPECT_EQ(wrong, 0);
  cudaFree(d);
}

// The build of test_gpu_on_host uses AddressSanitizer, which stands in for compute-sanitizer's memcheck.
TEST(CudaOnHostDeathTest, AKernelWritingPastItsBufferIsCaught) {
#if defined(__SANITIZE_ADDRESS__)
  int* d = device_alloc<int>(100);
  EXPECT_DEATH(grid_stride_kernel<<<1, 128>>>(d, 101), "heap-buffer-overflow");
  cudaFree(d);
#else
  GTEST_SKIP() << "built without AddressSanitizer";
#endif
}

TEST(CudaOnHost, TheRuntimeIsStricterThanAGpu) {
  float* d = device_alloc<float>(4);
  EXPECT_TRUE(std::isnan(download(d, 4)[0])) << "new device memory reads as NaN";
  std::vector<float> h(8, 1.0f);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 8 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "past the allocation's end";
  EXPECT_EQ(cudaMemcpy(h.data(), d, 4 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "the kind names the wrong direction";
  EXPECT_EQ(cudaMemcpy(d, h.data(), 4 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue) << "freed twice";
  (void)cudaGetLastError();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle) << "a destroyed stream";
  (void)cudaGetLastError();
}

TEST(CudaOnHost, ACopyIntoPinnedMemoryLandsWhenTheHostWaits) {
  int* d = device_alloc<int>(4);
  const int ones[4] = {1, 1, 1, 1};
  ASSERT_EQ(cudaMemcpy(d, ones, sizeof ones, cudaMemcpyHostToDevice), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocHost(&p, sizeof ones), cudaSuccess);
  int* pinned = static_cast<int*>(p);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    pinned[0] = 0;
    ASSERT_EQ(cudaMemcpyAsync(pinned, d, sizeof ones, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(pinned[0], 0) << "read before waiting: the copy has not landed";
    switch (round) {
      case 0: ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess); break;
      case 1:  // an event recorded after the copy: "not ready" once, then done
        ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
        ASSERT_EQ(cudaEventQuery(e), cudaErrorNotReady);
        ASSERT_EQ(cudaGetLastError(), cudaErrorNotReady);
        EXPECT_EQ(pinned[0], 0) << "the event is not ready: the copy has not landed";
        ASSERT_EQ(cudaEventQuery(e), cudaSuccess);
        break;
      default: ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    EXPECT_EQ(pinned[0], 1) << "round " << round << ": waited, the copy has landed";
  }
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaFreeHost(p);
  cudaFree(d);
}

TEST(CudaOnHost, AStreamWithNewWorkIsBusyOnce) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = device_alloc<int>(1);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  grid_stride_kernel<<<1, 32, 0, s>>>(d, 1);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "left in the error slot, as the runtime leaves it";
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  cudaFree(d);
  cudaStreamDestroy(s);
}

}  // namespace
