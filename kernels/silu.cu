// kernels/silu.cu — the CUDA twins of SiLU and sigmoid (ops/silu) through the unary-op helper.
// CPU twins: src/ops/silu/silu.cpp.
#include "ops/silu/silu.hpp"
#include "unary.cuh"

namespace hetrain::cuda {
namespace {
__device__ inline float logistic(float x) { return 1.f / (1.f + expf(-x)); }

struct Silu {
  static constexpr const char* kForward = "silu_forward";
  static constexpr const char* kBackward = "silu_backward";
  __device__ float operator()(float x) const { return x * logistic(x); }
  __device__ float operator()(float dy, float x) const {
    const float s = logistic(x);
    return dy * s * (1.f + x * (1.f - s));
  }
};
struct Sigmoid {
  static constexpr const char* kForward = "sigmoid_forward";
  static constexpr const char* kBackward = "sigmoid_backward";
  __device__ float operator()(float x) const { return logistic(x); }
  __device__ float operator()(float dy, float y) const { return dy * y * (1.f - y); }
};
}  // namespace
}  // namespace hetrain::cuda

namespace hetrain::ops {
HT_UNARY_CUDA(silu_op, cuda::Silu);
HT_UNARY_CUDA(sigmoid_op, cuda::Sigmoid);
}  // namespace hetrain::ops
