// ops/relu/relu_cuda.cu — ReLU's CUDA slot: cuDNN's activation (src/cuda/relu_cudnn.cpp), default stream.
#include "hetrain/cuda.hpp"
#include "ops/relu/relu.hpp"

namespace hetrain::ops {
namespace {
void relu_forward_cuda(float* y, const float* x, int64_t n) { cuda::relu_forward(y, x, n, nullptr); }
void relu_backward_cuda(float* dx, const float* dy, const float* y, int64_t n) {
  cuda::relu_backward(dx, dy, y, n, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(relu_forward_impl, Device::CUDA, relu_forward_cuda);
HT_OP_IMPLEMENTATION(relu_backward_impl, Device::CUDA, relu_backward_cuda);
}  // namespace hetrain::ops
