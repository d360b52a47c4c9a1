// nn/relu.cpp — ReLU over cpu::relu_* or cuda::relu_* (cuDNN).
#include "nn/relu.hpp"

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::nn {

Tensor ReLU::forward(const Tensor& x, bool) {
  y_ = buffer(y_, x.shape(), x.device());
  if (x.device() == Device::CUDA)
    cuda::relu_forward(y_.data(), x.data(), x.numel(), nullptr);
  else
    cpu::relu_forward(y_.data(), x.data(), x.numel());
  return y_;
}

Tensor ReLU::backward(const Tensor& dy) {
  HT_CHECK(y_.defined(), "relu: backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_.shape(), "relu: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_.shape()));
  Tensor dx;
  if (need_dx_) {
    dx = buffer(dx_, dy.shape(), dy.device());
    if (dy.device() == Device::CUDA)
      cuda::relu_backward(dx.data(), dy.data(), y_.data(), dy.numel(), nullptr);
    else
      cpu::relu_backward(dx.data(), dy.data(), y_.data(), dy.numel());
  }
  if (pool_) y_ = Tensor();  // pooled: free for reuse; own buffer: kept for the next forward
  return dx;
}

}  // namespace hetrain::nn
