// ops/pool/pool_cuda.cu — pooling's CUDA slots: cuDNN (src/cuda/pool2d_cudnn.cpp) and
// kernels/global_avgpool.cu, default stream.
#include "hetrain/cuda.hpp"
#include "ops/pool/pool.hpp"

namespace hetrain::ops {
namespace {
void maxpool_forward_cuda(const Tensor& y, const Tensor& x, MaxPoolSaved& saved, bool for_backward) {
  cuda::maxpool2d_forward(y.data(), x.data(), saved.geom, nullptr);
  if (for_backward) saved.x = x, saved.y = y;  // cuDNN's backward re-finds the maxima from both
}
void maxpool_backward_cuda(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved) {
  cuda::maxpool2d_backward(dx.data(), dy.data(), saved.y.data(), saved.x.data(), saved.geom, nullptr);
}
void avgpool_forward_cuda(float* y, const float* x, const cpu::Pool2dGeom& g) {
  cuda::avgpool2d_forward(y, x, g, nullptr);
}
void avgpool_backward_cuda(float* dx, const float* dy, const float* x, const cpu::Pool2dGeom& g) {
  cuda::avgpool2d_backward(dx, dy, x, g, nullptr);
}
void global_forward_cuda(float* out, const float* in, int N, int C, int HW) {
  cuda::global_avgpool_forward(out, in, N, C, HW, nullptr);
}
void global_backward_cuda(float* din, const float* dout, int N, int C, int HW) {
  cuda::global_avgpool_backward(din, dout, N, C, HW, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(maxpool2d_forward_impl, Device::CUDA, maxpool_forward_cuda);
HT_OP_IMPLEMENTATION(maxpool2d_backward_impl, Device::CUDA, maxpool_backward_cuda);
HT_OP_IMPLEMENTATION(avgpool2d_forward_impl, Device::CUDA, avgpool_forward_cuda);
HT_OP_IMPLEMENTATION(avgpool2d_backward_impl, Device::CUDA, avgpool_backward_cuda);
HT_OP_IMPLEMENTATION(global_avgpool_forward_impl, Device::CUDA, global_forward_cuda);
HT_OP_IMPLEMENTATION(global_avgpool_backward_impl, Device::CUDA, global_backward_cuda);
}  // namespace hetrain::ops
