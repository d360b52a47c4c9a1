// src/cuda/relu_cudnn.cpp — ReLU forward and backward through cuDNN's activation API.
//
// The n elements are viewed as [1, 1, 1, chunk] tensors, chunk < 2^31 (cuDNN's int dimensions). Backward
// passes the forward's output as both y and x: out > 0 exactly where in > 0, so whichever cuDNN reads, the
// mask is cpu::relu_backward's. cuDNN allows both calls in place.
#include <algorithm>

#include "cuda/descriptors.hpp"
#include "cuda/handles.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
constexpr int64_t kChunk = int64_t(1) << 30;

class ReluDesc {
 public:
  ReluDesc() {
    HT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_));
    cudnnStatus_t rc = cudnnSetActivationDescriptor(d_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0);
    if (rc != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyActivationDescriptor(d_);
      HT_THROW("cuDNN ReLU activation descriptor rejected: ", cudnnGetErrorString(rc));
    }
  }
  ~ReluDesc() { cudnnDestroyActivationDescriptor(d_); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  operator cudnnActivationDescriptor_t() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_ = nullptr;
};
}  // namespace

void relu_forward(float* out, const float* in, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "cuda::relu_forward: negative size ", n);
  if (n == 0) return;
  HT_CHECK(out && in, "cuda::relu_forward: null pointer");
  ReluDesc relu;
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    detail::TensorDesc t(1, 1, 1, int(m));
    HT_CUDNN_CHECK(cudnnActivationForward(h, relu, &one, t, in + i, &zero, t, out + i));
  }
}

void relu_backward(float* din, const float* dout, const float* out, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "cuda::relu_backward: negative size ", n);
  if (n == 0) return;
  HT_CHECK(din && dout && out, "cuda::relu_backward: null pointer");
  ReluDesc relu;
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    detail::TensorDesc t(1, 1, 1, int(m));
    HT_CUDNN_CHECK(cudnnActivationBackward(h, relu, &one, t, out + i, t, dout + i, t, out + i, &zero, t, din + i));
  }
}

}  // namespace hetrain::cuda
