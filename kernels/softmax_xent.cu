// kernels/softmax_xent.cu — softmax cross-entropy with label smoothing, forward and backward, and top-1
// (ops/softmax_xent), and the op's CUDA implementation. CPU twins: cpu::softmax_xent_forward /
// softmax_xent_backward / top1_correct (hetrain/ops.hpp, src/ops/softmax_xent/softmax_xent_cpu.cpp).
#include <cstdint>

#include "common.cuh"
#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"
#include "ops/softmax_xent/softmax_xent.hpp"

namespace hetrain::cuda {
namespace {
using detail::block_max;
using detail::block_sum;

// One block per row. With m = max z, s = Σ exp(z-m), log p_k = z_k - m - log s, so
//   loss = -(1-ε)·log p_y - (ε/K)·Σ_k log p_k = log s - (1-ε)(z_y - m) - (ε/K)·Σ_k (z_k - m).
__global__ void softmax_xent_forward_kernel(float* probs, float* row_loss, const float* logits,
                                            const int32_t* labels, int K, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* z = logits + row * K;
  float* p = probs + row * K;

  float m = -FLT_MAX;
  for (int k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, z[k]);
  m = block_max(m, scratch);

  float s = 0.0f, sum_zm = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    float e = expf(z[k] - m);
    p[k] = e;  // unnormalised for now; rescaled below
    s += e;
    sum_zm += z[k] - m;
  }
  s = block_sum(s, scratch);
  sum_zm = block_sum(sum_zm, scratch);

  const float inv_s = 1.0f / s;
  for (int k = threadIdx.x; k < K; k += blockDim.x) p[k] *= inv_s;

  if (threadIdx.x == 0) {
    const int y = labels[row];
    if (y < 0 || y >= K) {
      row_loss[row] = __int_as_float(0x7fc00000);  // NaN: a bad label must not pass silently
    } else {
      const float log_s = logf(s);
      // The smoothing term only with smoothing, as on the CPU (0·−inf would make a finite loss NaN).
      row_loss[row] = log_s - (1.0f - eps) * (z[y] - m) - (eps > 0.0f ? (eps / K) * sum_zm : 0.0f);
    }
  }
}

// Elementwise over N·K: dlogits = (p - target)·scale, target = (1-ε)·[k == y] + ε/K.
__global__ void softmax_xent_backward_kernel(float* dlogits, const float* probs, const int32_t* labels, int N, int K,
                                             float eps, float scale) {
  const int64_t total = int64_t(N) * K;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / K;
    const int k = int(i - row * K);
    const int y = labels[row];
    float target = eps / K + (k == y ? 1.0f - eps : 0.0f);
    float g = (probs[i] - target) * scale;
    dlogits[i] = (y < 0 || y >= K) ? __int_as_float(0x7fc00000) : g;
  }
}

// (v, i) beats (bv, bi) as torch.argmax orders them: a NaN beats every number, and among equals (or NaNs) the
// lower index wins; bi == K is "none yet" and loses to anything.
__device__ inline bool argmax_beats(float v, int i, float bv, int bi, int K) {
  if (i >= K) return false;
  if (bi >= K) return true;
  const bool vn = isnan(v), bn = isnan(bv);
  if (vn != bn) return vn;
  if (vn) return i < bi;
  return v > bv || (v == bv && i < bi);
}

// One block per row: the first index of the maximum (ties go to the lower index, as a sequential scan).
__global__ void top1_correct_kernel(unsigned long long* count, const float* logits, const int32_t* labels, int K) {
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  const int64_t row = blockIdx.x;
  const float* z = logits + row * K;
  float bv = -FLT_MAX;
  int bi = K;  // "none yet": loses every tie
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    if (argmax_beats(z[k], k, bv, bi, K)) { bv = z[k]; bi = k; }  // ascending k: the first of equals stays
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (int(threadIdx.x) < half) {
      float ov = best_v[threadIdx.x + half];
      int oi = best_i[threadIdx.x + half];
      float mv = best_v[threadIdx.x];
      int mi = best_i[threadIdx.x];
      if (argmax_beats(ov, oi, mv, mi, K)) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && best_i[0] == labels[row]) atomicAdd(count, 1ull);
}

void check_rows(const char* op, int N, int K) {
  HT_CHECK(N >= 0 && K > 0, op, ": need N >= 0 and K > 0, got N=", N, " K=", K);
  HT_CHECK(N <= 2147483647, op, ": too many rows");
}
}  // namespace

void softmax_xent_forward(float* probs, float* row_loss, const float* logits, const int32_t* labels, int N, int K,
                          float label_smoothing, CudaStream stream) {
  check_rows("softmax_xent_forward", N, K);
  HT_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, "softmax_xent_forward: label smoothing must be in [0, 1], got ",
           label_smoothing);
  if (N == 0) return;
  HT_CHECK(probs && row_loss && logits && labels, "softmax_xent_forward: null pointer");
  softmax_xent_forward_kernel<<<N, detail::row_block_size(K), 0, stream>>>(probs, row_loss, logits, labels, K,
                                                                           label_smoothing);
  HT_CUDA_CHECK_LAUNCH("softmax_xent_forward");
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* labels, int N, int K,
                           float label_smoothing, float scale, CudaStream stream) {
  check_rows("softmax_xent_backward", N, K);
  if (N == 0) return;
  HT_CHECK(dlogits && probs && labels, "softmax_xent_backward: null pointer");
  const int block = 256;
  const int64_t grid = HT_CEIL_DIV(int64_t(N) * K, int64_t(block));
  const int grid_capped = int(grid < 65536 ? grid : 65536);  // grid-stride covers the rest
  softmax_xent_backward_kernel<<<grid_capped, block, 0, stream>>>(dlogits, probs, labels, N, K, label_smoothing,
                                                                  scale);
  HT_CUDA_CHECK_LAUNCH("softmax_xent_backward");
}

void top1_correct(int64_t* count, const float* logits, const int32_t* labels, int N, int K, CudaStream stream) {
  check_rows("top1_correct", N, K);
  if (N == 0) return;
  HT_CHECK(count && logits && labels, "top1_correct: null pointer");
  static_assert(sizeof(int64_t) == sizeof(unsigned long long), "atomicAdd on the int64 counter");
  // The shared-memory tree needs a power-of-two block.
  int block = 32;
  while (block < K && block < 256) block *= 2;
  top1_correct_kernel<<<N, block, 0, stream>>>(reinterpret_cast<unsigned long long*>(count), logits, labels, K);
  HT_CUDA_CHECK_LAUNCH("top1_correct");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
// The kernels on the legacy default stream, like the model's layers; the per-row losses and the correct
// count are copied into pinned memory there, so read() waits only for this step's work.
class CudaSoftmaxXent : public SoftmaxXentKernel {
 public:
  ~CudaSoftmaxXent() override {
    cuda::host_pinned_free(pinned_loss_);
    cuda::host_pinned_free(pinned_correct_);
  }
  Tensor compute(const Tensor& logits, const int32_t* labels, float label_smoothing, bool want_gradient,
                 float grad_scale) override {
    const int64_t n = logits.dim(0), K = logits.dim(1);
    reserve(n);
    rows_ = n;
    if (!probs_.defined() || probs_.shape() != logits.shape()) probs_ = Tensor(logits.shape(), Device::CUDA);
    cuda::softmax_xent_forward(probs_.data(), row_loss_.data(), logits.data(), labels, int(n), int(K),
                               label_smoothing, nullptr);
    cuda::memset_zero(correct_.data(), sizeof(int64_t));
    cuda::top1_correct(correct_.data(), logits.data(), labels, int(n), int(K), nullptr);
    cuda::copy_to_host(pinned_loss_, row_loss_.data(), size_t(n) * sizeof(float), nullptr);
    cuda::copy_to_host(pinned_correct_, correct_.data(), sizeof(int64_t), nullptr);
    if (!want_gradient) return Tensor();
    cuda::softmax_xent_backward(probs_.data(), probs_.data(), labels, int(n), int(K), label_smoothing,
                                grad_scale / float(n), nullptr);
    return probs_;
  }
  void read(double* loss_sum, double* correct) override {
    cuda::stream_synchronize(nullptr);
    double sum = 0;
    for (int64_t i = 0; i < rows_; ++i) sum += double(pinned_loss_[i]);  // NaN stays NaN: the caller checks
    *loss_sum = sum;
    *correct = double(*pinned_correct_);
  }

 private:
  void reserve(int64_t n) {
    if (n > capacity_) {
      cuda::stream_synchronize(nullptr);  // pending copies into the old pinned buffer
      cuda::host_pinned_free(pinned_loss_);
      pinned_loss_ = nullptr, capacity_ = 0;  // consistent even if the allocation below throws
      pinned_loss_ = static_cast<float*>(cuda::host_pinned_alloc(size_t(n) * sizeof(float)));
      row_loss_ = cuda::DeviceBuffer<float>(size_t(n));
      capacity_ = n;
    }
    if (!pinned_correct_) {
      pinned_correct_ = static_cast<int64_t*>(cuda::host_pinned_alloc(sizeof(int64_t)));
      correct_ = cuda::DeviceBuffer<int64_t>(1);
    }
  }
  Tensor probs_;                         // [n, K]; holds dlogits after the backward kernel
  cuda::DeviceBuffer<float> row_loss_;   // [capacity]
  cuda::DeviceBuffer<int64_t> correct_;  // [1]
  float* pinned_loss_ = nullptr;         // [capacity]
  int64_t* pinned_correct_ = nullptr;    // [1]
  int64_t capacity_ = 0, rows_ = 0;
};

std::unique_ptr<SoftmaxXentKernel> make_cuda() { return std::make_unique<CudaSoftmaxXent>(); }
}  // namespace
HT_OP_IMPLEMENTATION(softmax_xent_impl, Device::CUDA, make_cuda);
}  // namespace hetrain::ops
