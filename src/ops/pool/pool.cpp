// ops/pool/pool.cpp — pooling's entry points and CPU slots (cpu::*pool*).
#include "ops/pool/pool.hpp"
#include "hetrain/op_profile.hpp"

namespace hetrain::ops {

Dispatch<MaxPoolForwardFn> maxpool2d_forward_impl("maxpool2d_forward");
Dispatch<MaxPoolBackwardFn> maxpool2d_backward_impl("maxpool2d_backward");
Dispatch<AvgPoolForwardFn> avgpool2d_forward_impl("avgpool2d_forward");
Dispatch<AvgPoolBackwardFn> avgpool2d_backward_impl("avgpool2d_backward");
Dispatch<GlobalPoolFn> global_avgpool_forward_impl("global_avgpool_forward");
Dispatch<GlobalPoolFn> global_avgpool_backward_impl("global_avgpool_backward");

namespace {
void maxpool_forward_cpu(const Tensor& y, const Tensor& x, MaxPoolSaved& saved, bool /*argmax is the output*/) {
  saved.argmax.resize(static_cast<size_t>(y.numel()));
  cpu::maxpool2d_forward(y.data(), saved.argmax.data(), x.data(), saved.geom);
}
void maxpool_backward_cpu(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved) {
  cpu::maxpool2d_backward(dx.data(), dy.data(), saved.argmax.data(), saved.geom);
}
void avgpool_backward_cpu(float* dx, const float* dy, const float*, const Pool2dGeom& g) {
  cpu::avgpool2d_backward(dx, dy, g);
}
}  // namespace

HT_OP_IMPLEMENTATION(maxpool2d_forward_impl, Device::CPU, maxpool_forward_cpu);
HT_OP_IMPLEMENTATION(maxpool2d_backward_impl, Device::CPU, maxpool_backward_cpu);
HT_OP_IMPLEMENTATION(avgpool2d_forward_impl, Device::CPU, cpu::avgpool2d_forward<float>);
HT_OP_IMPLEMENTATION(avgpool2d_backward_impl, Device::CPU, avgpool_backward_cpu);
HT_OP_IMPLEMENTATION(global_avgpool_forward_impl, Device::CPU, cpu::global_avgpool_forward<float>);
HT_OP_IMPLEMENTATION(global_avgpool_backward_impl, Device::CPU, cpu::global_avgpool_backward<float>);

Pool2dGeom pool_geom(const char* op, const Shape& x, const PoolWindow& w) {
  HT_CHECK(x.size() == 4, op, ": expected input [N, C, H, W], got ", shape_str(x));
  Pool2dGeom g;
  g.N = int(x[0]), g.C = int(x[1]), g.H = int(x[2]), g.W = int(x[3]);
  g.kernel = w.kernel, g.stride = w.stride, g.pad = w.pad;
  HT_CHECK(g.P() > 0 && g.Q() > 0, op, ": input ", shape_str(x), " is too small for a ", w.kernel, "×", w.kernel,
           " window");
  return g;
}

Shape pool_output_shape(const char* op, const Shape& x, const PoolWindow& w) {
  const Pool2dGeom g = pool_geom(op, x, w);
  return {g.N, g.C, g.P(), g.Q()};
}

void maxpool2d_forward(const Tensor& y, const Tensor& x, const PoolWindow& window, MaxPoolSaved& saved,
                       bool for_backward) {
  const char* op = "maxpool2d_forward";
  OpProfileScope profile(op);
  saved = MaxPoolSaved();
  saved.geom = pool_geom(op, x.shape(), window);
  check_shape(op, "output", y, pool_output_shape(op, x.shape(), window));
  maxpool2d_forward_impl.on(common_device(op, {&y, &x}))(y, x, saved, for_backward);
  saved.valid = for_backward;
}

void maxpool2d_backward(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved) {
  const char* op = "maxpool2d_backward";
  OpProfileScope profile(op);
  HT_CHECK(saved.valid, op, ": no saved forward (each forward kept for backward allows one backward)");
  const Pool2dGeom& g = saved.geom;
  check_shape(op, "input gradient", dx, {g.N, g.C, g.H, g.W});
  check_shape(op, "output gradient", dy, {g.N, g.C, g.P(), g.Q()});
  maxpool2d_backward_impl.on(common_device(op, {&dx, &dy}))(dx, dy, saved);
  saved = MaxPoolSaved();
}

void avgpool2d_forward(const Tensor& y, const Tensor& x, const PoolWindow& window) {
  const char* op = "avgpool2d_forward";
  OpProfileScope profile(op);
  const Pool2dGeom g = pool_geom(op, x.shape(), window);
  check_shape(op, "output", y, {g.N, g.C, g.P(), g.Q()});
  avgpool2d_forward_impl.on(common_device(op, {&y, &x}))(y.data(), x.data(), g);
}

void avgpool2d_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const PoolWindow& window) {
  const char* op = "avgpool2d_backward";
  OpProfileScope profile(op);
  const Pool2dGeom g = pool_geom(op, x.shape(), window);
  check_shape(op, "input gradient", dx, x.shape());
  check_shape(op, "output gradient", dy, {g.N, g.C, g.P(), g.Q()});
  avgpool2d_backward_impl.on(common_device(op, {&dx, &dy, &x}))(dx.data(), dy.data(), x.data(), g);
}

void global_avgpool_forward(const Tensor& y, const Tensor& x) {
  const char* op = "global_avgpool_forward";
  OpProfileScope profile(op);
  HT_CHECK(x.ndim() == 4, op, ": expected input [N, C, H, W], got ", shape_str(x.shape()));
  check_shape(op, "output", y, {x.dim(0), x.dim(1)});
  global_avgpool_forward_impl.on(common_device(op, {&y, &x}))(y.data(), x.data(), int(x.dim(0)), int(x.dim(1)),
                                                              int(x.dim(2) * x.dim(3)));
}

void global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  const char* op = "global_avgpool_backward";
  OpProfileScope profile(op);
  HT_CHECK(dx.ndim() == 4, op, ": expected input gradient [N, C, H, W], got ", shape_str(dx.shape()));
  check_shape(op, "output gradient", dy, {dx.dim(0), dx.dim(1)});
  global_avgpool_backward_impl.on(common_device(op, {&dx, &dy}))(dx.data(), dy.data(), int(dx.dim(0)),
                                                                int(dx.dim(1)), int(dx.dim(2) * dx.dim(3)));
}

}  // namespace hetrain::ops
