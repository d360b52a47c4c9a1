// kernels/relu.cu — ReLU's CUDA twin (ops/relu) through the unary-op helper, and cuda::relu_* of
// hetrain/cuda.hpp on a given stream. CPU twin: src/ops/relu/relu.cpp, bit for bit (a comparison and a copy).
#include "unary.cuh"
#include "ops/relu/relu.hpp"

namespace hetrain::cuda {
namespace {
struct Relu {
  static constexpr const char* kForward = "relu_forward";
  static constexpr const char* kBackward = "relu_backward";
  // NaN kept, and dy passed where y is NaN, as the CPU twin and PyTorch (never fmaxf: it drops NaN).
  __device__ float operator()(float x) const { return x <= 0.f ? 0.f : x; }
  __device__ float operator()(float dy, float y) const { return y <= 0.f ? 0.f : dy; }
};
}  // namespace

void relu_forward(float* out, const float* in, int64_t n, CudaStream stream) { unary_forward<Relu>(out, in, n, stream); }
void relu_backward(float* din, const float* dout, const float* out, int64_t n, CudaStream stream) {
  unary_backward<Relu>(din, dout, out, n, stream);
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
HT_UNARY_CUDA(relu_op, cuda::Relu);
}  // namespace hetrain::ops
