// kernels/conv2d.cu — the convolution's CUDA slot: cuDNN (src/cuda/conv_cudnn.cpp), default stream.
#include "hetrain/cuda.hpp"
#include "ops/conv2d/conv2d.hpp"

namespace hetrain::ops {
namespace {
class CudnnConv2dKernel : public Conv2dKernel {
 public:
  CudnnConv2dKernel(const Conv2dGeom& g, const Conv2dOptions& o) : conv_(g, cudnn_options(o)) {}
  void forward(float* y, const float* x, const float* w, const float* b) override {
    conv_.forward(y, x, w, b, nullptr);
  }
  void backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w) override {
    conv_.backward(dx, dw, db, dy, x, w, nullptr);
  }

 private:
  static cuda::CudnnConvOptions cudnn_options(const Conv2dOptions& o) {
    cuda::CudnnConvOptions c;
    c.precision = o.precision;
    return c;
  }
  cuda::CudnnConv2d conv_;
};

std::unique_ptr<Conv2dKernel> make_cudnn_conv(const Conv2dGeom& g, const Conv2dOptions& o) {
  return std::make_unique<CudnnConv2dKernel>(g, o);
}
}  // namespace
HT_OP_IMPLEMENTATION(conv2d_impl, Device::CUDA, make_cudnn_conv);
}  // namespace hetrain::ops
