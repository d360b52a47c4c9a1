// src/cuda/pool2d_cudnn.cpp — max and average pooling through cuDNN with Pool2dGeom.
//
// Max pooling uses CUDNN_POOLING_MAX_DETERMINISTIC, so overlapping windows (ResNet's 3×3 stride-2 stem
// pool) give the same gradients run after run. Average pooling uses AVERAGE_COUNT_INCLUDE_PADDING: the
// divisor is always kernel², PyTorch's count_include_pad=True. Backward overwrites din (beta = 0).
#include "cuda/descriptors.hpp"
#include "cuda/handles.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {

void check_geom(const Pool2dGeom& g, const char* who) {
  // pad ≤ kernel/2 (PyTorch's rule, and ops::cpu::'s) guarantees every window overlaps the image.
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.kernel > 0 && g.stride > 0 && g.pad >= 0 &&
               2 * g.pad <= g.kernel && g.P() > 0 && g.Q() > 0,
           who, ": bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " kernel=", g.kernel,
           " stride=", g.stride, " pad=", g.pad);
}

class PoolDesc {
 public:
  PoolDesc(cudnnPoolingMode_t mode, const Pool2dGeom& g) {
    HT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_));
    cudnnStatus_t rc = cudnnSetPooling2dDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, g.kernel, g.kernel, g.pad, g.pad,
                                                   g.stride, g.stride);
    if (rc != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyPoolingDescriptor(d_);
      HT_THROW("cuDNN pooling descriptor kernel ", g.kernel, " stride ", g.stride, " pad ", g.pad,
               " rejected: ", cudnnGetErrorString(rc));
    }
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  operator cudnnPoolingDescriptor_t() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

void pool_forward(cudnnPoolingMode_t mode, float* out, const float* in, const Pool2dGeom& g, CudaStream stream,
                  const char* who) {
  check_geom(g, who);
  if (g.N == 0) return;
  HT_CHECK(out && in, who, ": null pointer");
  PoolDesc pool(mode, g);
  detail::TensorDesc x(g.N, g.C, g.H, g.W), y(g.N, g.C, g.P(), g.Q());
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDNN_CHECK(cudnnPoolingForward(h, pool, &one, x, in, &zero, y, out));
}

void pool_backward(cudnnPoolingMode_t mode, float* din, const float* dout, const float* out, const float* in,
                   const Pool2dGeom& g, CudaStream stream, const char* who) {
  check_geom(g, who);
  if (g.N == 0) return;
  HT_CHECK(din && dout && out && in, who, ": null pointer");
  PoolDesc pool(mode, g);
  detail::TensorDesc x(g.N, g.C, g.H, g.W), y(g.N, g.C, g.P(), g.Q());
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDNN_CHECK(cudnnPoolingBackward(h, pool, &one, y, out, y, dout, x, in, &zero, x, din));
}
}  // namespace

void maxpool2d_forward(float* out, const float* in, const Pool2dGeom& g, CudaStream stream) {
  pool_forward(CUDNN_POOLING_MAX_DETERMINISTIC, out, in, g, stream, "cuda::maxpool2d_forward");
}

void maxpool2d_backward(float* din, const float* dout, const float* out, const float* in, const Pool2dGeom& g,
                        CudaStream stream) {
  pool_backward(CUDNN_POOLING_MAX_DETERMINISTIC, din, dout, out, in, g, stream, "cuda::maxpool2d_backward");
}

void avgpool2d_forward(float* out, const float* in, const Pool2dGeom& g, CudaStream stream) {
  pool_forward(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, out, in, g, stream, "cuda::avgpool2d_forward");
}

// Average pooling's gradient does not depend on the forward's values, but cuDNN's call takes them. x is
// the forward's real input: cuDNN does not document that x may overlap dx, which it writes (passing din
// for both, as this once did, relied on undocumented behaviour). dout stands in for y: same shape, and
// like y only read.
void avgpool2d_backward(float* din, const float* dout, const float* in, const Pool2dGeom& g, CudaStream stream) {
  HT_CHECK(in != din, "cuda::avgpool2d_backward: din must not be the forward's input");
  pool_backward(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, din, dout, dout, in, g, stream,
                "cuda::avgpool2d_backward");
}

}  // namespace hetrain::cuda
