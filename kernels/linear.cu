// kernels/linear.cu — the dense layer's CUDA slot: cuBLAS (src/cuda/linear_cublas.cpp), default stream.
#include "hetrain/cuda.hpp"
#include "ops/linear/linear.hpp"

namespace hetrain::ops {
namespace {
void linear_forward_cuda(float* y, const float* x, const float* w, const float* b, int N, int I, int O,
                         Precision precision) {
  cuda::linear_forward(y, x, w, b, N, I, O, nullptr, precision);
}
void linear_backward_cuda(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                          int I, int O, Precision precision) {
  cuda::linear_backward(dx, dw, db, dy, x, w, N, I, O, nullptr, precision);
}
}  // namespace
HT_OP_IMPLEMENTATION(linear_forward_impl, Device::CUDA, linear_forward_cuda);
HT_OP_IMPLEMENTATION(linear_backward_impl, Device::CUDA, linear_backward_cuda);
}  // namespace hetrain::ops
