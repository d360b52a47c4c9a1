// nn/residual.cpp — residual blocks: forward adds the shortcut then applies ReLU; backward routes the
// gradient through both paths and sums them.
#include "nn/residual.hpp"

#include "hetrain/error.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/unary_layer.hpp"
#include "ops/add/add.hpp"
#include "ops/relu/relu.hpp"

namespace hetrain::nn {

void ResidualBlock::make_shortcut(ParamBuffer& pb, const std::string& prefix, int in, int out, int stride,
                                  Workspace* ws) {
  if (stride == 1 && in == out) return;
  shortcut_.add<Conv2d>(pb, prefix + ".downsample.0", in, out, 1, stride, 0, false, ws);
  shortcut_.add<BatchNorm2d>(pb, prefix + ".downsample.1", out);
}

void ResidualBlock::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  main_.set_buffer_pool(pool);
  shortcut_.set_buffer_pool(pool);
}

Tensor ResidualBlock::forward(const Tensor& x, bool training) {
  Tensor m = main_.forward(x, training);
  Tensor s = shortcut_.empty() ? x : shortcut_.forward(x, training);
  HT_CHECK(m.shape() == s.shape(), "residual block: main path ", shape_str(m.shape()), " and shortcut ",
           shape_str(s.shape()), " differ");
  y_ = buffer(y_, m.shape(), m.device());
  ops::add_relu(y_, m, s);
  return y_;
}

Tensor ResidualBlock::backward(const Tensor& dy) {
  HT_CHECK(y_.defined(), "residual block: backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_.shape(), "residual block: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_.shape()));
  // d(sum) = dy·[y > 0], shared by both paths.
  Tensor dsum = buffer(dmain_, dy.shape(), dy.device());
  ops::relu_backward(dsum, dy, y_);
  if (pool_) y_ = Tensor();  // pooled: free for reuse by the gradients below
  Tensor dx_main = main_.backward(dsum);
  Tensor dx_short = shortcut_.empty() ? dsum : shortcut_.backward(dsum);
  if (!need_dx_) return Tensor();
  Tensor dx = buffer(dx_, dx_main.shape(), dy.device());
  ops::add(dx, dx_main, dx_short);
  return dx;
}

BasicBlock::BasicBlock(ParamBuffer& pb, const std::string& prefix, int in, int planes, int stride, Workspace* ws) {
  main_.add<Conv2d>(pb, prefix + ".conv1", in, planes, 3, stride, 1, false, ws);
  main_.add<BatchNorm2d>(pb, prefix + ".bn1", planes);
  main_.add<ReLU>();
  main_.add<Conv2d>(pb, prefix + ".conv2", planes, planes, 3, 1, 1, false, ws);
  main_.add<BatchNorm2d>(pb, prefix + ".bn2", planes);
  make_shortcut(pb, prefix, in, planes * kExpansion, stride, ws);
}

Bottleneck::Bottleneck(ParamBuffer& pb, const std::string& prefix, int in, int planes, int stride, Workspace* ws) {
  const int out = planes * kExpansion;
  main_.add<Conv2d>(pb, prefix + ".conv1", in, planes, 1, 1, 0, false, ws);
  main_.add<BatchNorm2d>(pb, prefix + ".bn1", planes);
  main_.add<ReLU>();
  main_.add<Conv2d>(pb, prefix + ".conv2", planes, planes, 3, stride, 1, false, ws);
  main_.add<BatchNorm2d>(pb, prefix + ".bn2", planes);
  main_.add<ReLU>();
  main_.add<Conv2d>(pb, prefix + ".conv3", planes, out, 1, 1, 0, false, ws);
  main_.add<BatchNorm2d>(pb, prefix + ".bn3", out);
  make_shortcut(pb, prefix, in, out, stride, ws);
}

}  // namespace hetrain::nn
