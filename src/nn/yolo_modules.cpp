// nn/yolo_modules.cpp — YOLOv5's modules and the graph's multi-input layers, over device-agnostic ops.
//
// Gradient sums (a shortcut, SPPF's chained pools, C3's two branches) go through ops::accumulate into a
// buffer this layer just received from a child's backward: that buffer is fresh (pooled or the child's own)
// and nobody else reads it, so adding in place is safe.
#include "nn/yolo_modules.hpp"

#include "hetrain/error.hpp"
#include "ops/add/add.hpp"
#include "ops/concat/concat.hpp"
#include "ops/detect_rows/detect_rows.hpp"
#include "nn/unary_layer.hpp"
#include "ops/upsample/upsample.hpp"

namespace hetrain::nn {

// ---------------------------------------------------------------- LayerNode, LayerChain

Tensor LayerNode::forward(const std::vector<Tensor>& xs, bool training) {
  HT_CHECK(xs.size() == 1, "layer node: expected one input, got ", xs.size());
  return layer_->forward(xs[0], training);
}

Tensor LayerChain::forward(const Tensor& x, bool training) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(h, training);
  return h;
}

Tensor LayerChain::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) g = layers_[i]->backward(g);
  return g;
}

bool LayerChain::has_batch_coupling() const {
  for (const auto& l : layers_)
    if (l->has_batch_coupling()) return true;
  return false;
}

void LayerChain::set_need_input_grad(bool need) {
  need_dx_ = need;
  if (!layers_.empty()) layers_.front()->set_need_input_grad(need);
}

void LayerChain::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  for (auto& l : layers_) l->set_buffer_pool(pool);
}

// ---------------------------------------------------------------- Conv, Bottleneck

YoloConv::YoloConv(ParamBuffer& pb, const std::string& name, int c1, int c2, int k, int s, int p, bool act,
                   Workspace* ws) {
  add<Conv2d>(pb, name + ".conv", c1, c2, k, s, p, false, ws);
  add<BatchNorm2d>(pb, name + ".bn", c2, kBnMomentum, kBnEps);
  if (act) add<SiLU>();
}

YoloBottleneck::YoloBottleneck(ParamBuffer& pb, const std::string& name, int c1, int c2, bool shortcut, double e,
                               Workspace* ws)
    : cv1_(pb, name + ".cv1", c1, int(c2 * e), 1, 1, 0, true, ws),
      cv2_(pb, name + ".cv2", int(c2 * e), c2, 3, 1, 1, true, ws),
      add_(shortcut && c1 == c2) {
  HT_CHECK(int(c2 * e) >= 1, name, ": hidden channels int(", c2, "·", e, ") must be >= 1");
}

void YoloBottleneck::set_need_input_grad(bool need) {
  need_dx_ = need;
  cv1_.set_need_input_grad(need);
}

void YoloBottleneck::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  cv1_.set_buffer_pool(pool);
  cv2_.set_buffer_pool(pool);
}

Tensor YoloBottleneck::forward(const Tensor& x, bool training) {
  Tensor h = cv2_.forward(cv1_.forward(x, training), training);
  if (!add_) return h;
  Tensor y = buffer(y_, h.shape(), h.device());
  ops::add(y, x, h);
  return y;
}

Tensor YoloBottleneck::backward(const Tensor& dy) {
  Tensor dx = cv1_.backward(cv2_.backward(dy));
  if (add_ && dx.defined()) ops::accumulate(dx, dy);  // the shortcut's share
  return dx;
}

// ---------------------------------------------------------------- C3

C3::C3(ParamBuffer& pb, const std::string& name, int c1, int c2, int n, bool shortcut, double e, Workspace* ws)
    : c_(int(c2 * e)),
      cv1_(pb, name + ".cv1", c1, c_, 1, 1, 0, true, ws),
      cv2_(pb, name + ".cv2", c1, c_, 1, 1, 0, true, ws),
      cv3_(pb, name + ".cv3", 2 * c_, c2, 1, 1, 0, true, ws) {
  HT_CHECK(c_ >= 1, name, ": hidden channels int(", c2, "·", e, ") must be >= 1");
  for (int j = 0; j < n; ++j)
    m_.add<YoloBottleneck>(pb, name + ".m." + std::to_string(j), c_, c_, shortcut, 1.0, ws);
}

void C3::set_need_input_grad(bool need) {
  need_dx_ = need;
  cv1_.set_need_input_grad(need);
  cv2_.set_need_input_grad(need);
}

void C3::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  cv1_.set_buffer_pool(pool);
  cv2_.set_buffer_pool(pool);
  cv3_.set_buffer_pool(pool);
  m_.set_buffer_pool(pool);
}

Tensor C3::forward(const Tensor& x, bool training) {
  Tensor a = m_.forward(cv1_.forward(x, training), training);
  Tensor b = cv2_.forward(x, training);
  Tensor cat = buffer(cat_, {a.dim(0), 2 * c_, a.dim(2), a.dim(3)}, a.device());
  ops::concat_channels_forward(cat, {a, b});
  return cv3_.forward(cat, training);
}

Tensor C3::backward(const Tensor& dy) {
  Tensor dcat = cv3_.backward(dy);
  const Shape half = {dcat.dim(0), c_, dcat.dim(2), dcat.dim(3)};
  Tensor da = pool_ ? pool_->acquire(half, dcat.device()) : Tensor(half, dcat.device());
  Tensor db = pool_ ? pool_->acquire(half, dcat.device()) : Tensor(half, dcat.device());
  ops::concat_channels_backward({da, db}, dcat);
  dcat = Tensor();
  Tensor dx = cv1_.backward(m_.backward(da));
  da = Tensor();
  Tensor dx2 = cv2_.backward(db);
  if (dx.defined()) ops::accumulate(dx, dx2);
  return dx;
}

// ---------------------------------------------------------------- SPPF

SPPF::SPPF(ParamBuffer& pb, const std::string& name, int c1, int c2, int k, Workspace* ws)
    : c_(c1 / 2),
      cv1_(pb, name + ".cv1", c1, c1 / 2, 1, 1, 0, true, ws),
      cv2_(pb, name + ".cv2", 4 * (c1 / 2), c2, 1, 1, 0, true, ws),
      m1_(k, 1, k / 2),
      m2_(k, 1, k / 2),
      m3_(k, 1, k / 2) {
  HT_CHECK(c_ >= 1, name, ": needs at least 2 input channels (cv1 halves them), got ", c1);
  HT_CHECK(k >= 1 && k % 2 == 1, name, ": the pool kernel must be odd (it keeps the size), got ", k);
}

void SPPF::set_need_input_grad(bool need) {
  need_dx_ = need;
  cv1_.set_need_input_grad(need);
}

void SPPF::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  cv1_.set_buffer_pool(pool);
  cv2_.set_buffer_pool(pool);
  m1_.set_buffer_pool(pool);
  m2_.set_buffer_pool(pool);
  m3_.set_buffer_pool(pool);
}

Tensor SPPF::forward(const Tensor& x, bool training) {
  Tensor x1 = cv1_.forward(x, training);
  Tensor y1 = m1_.forward(x1, training);
  Tensor y2 = m2_.forward(y1, training);
  Tensor y3 = m3_.forward(y2, training);
  Tensor cat = buffer(cat_, {x1.dim(0), 4 * c_, x1.dim(2), x1.dim(3)}, x1.device());
  ops::concat_channels_forward(cat, {x1, y1, y2, y3});
  return cv2_.forward(cat, training);
}

Tensor SPPF::backward(const Tensor& dy) {
  Tensor dcat = cv2_.backward(dy);
  const Shape part = {dcat.dim(0), c_, dcat.dim(2), dcat.dim(3)};
  std::vector<Tensor> d(4);
  for (auto& t : d) t = pool_ ? pool_->acquire(part, dcat.device()) : Tensor(part, dcat.device());
  ops::concat_channels_backward(d, dcat);
  dcat = Tensor();
  // y3 = m3(y2), y2 = m2(y1), y1 = m1(x1): each pooled output also feeds the concat.
  Tensor g2 = m3_.backward(d[3]);
  ops::accumulate(g2, d[2]);
  Tensor g1 = m2_.backward(g2);
  ops::accumulate(g1, d[1]);
  Tensor g0 = m1_.backward(g1);
  ops::accumulate(g0, d[0]);
  d.clear();
  return cv1_.backward(g0);
}

// ---------------------------------------------------------------- Upsample

Tensor UpsampleNearest::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4, "upsample: expected input [N, C, H, W], got ", shape_str(x.shape()));
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {x.dim(0), x.dim(1), x.dim(2) * f_, x.dim(3) * f_}, x.device());
  ops::upsample_nearest_forward(y, x, f_);
  return y;
}

Tensor UpsampleNearest::backward(const Tensor& dy) {
  HT_CHECK(!in_shape_.empty(), "upsample: backward without a forward");
  if (!need_dx_) return Tensor();
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  ops::upsample_nearest_backward(dx, dy, f_);
  return dx;
}

// ---------------------------------------------------------------- Concat, Add

Tensor ConcatChannels::forward(const std::vector<Tensor>& xs, bool) {
  HT_CHECK(!xs.empty(), "concat: no inputs");
  channels_.clear();
  int64_t c = 0;
  for (const Tensor& x : xs) {
    HT_CHECK(x.ndim() == 4 && x.dim(0) == xs[0].dim(0) && x.dim(2) == xs[0].dim(2) && x.dim(3) == xs[0].dim(3),
             "concat: inputs ", shape_str(xs[0].shape()), " and ", shape_str(x.shape()), " differ in N, H or W");
    channels_.push_back(x.dim(1));
    c += x.dim(1);
  }
  y_shape_ = {xs[0].dim(0), c, xs[0].dim(2), xs[0].dim(3)};
  device_ = xs[0].device();
  Tensor y = fresh(y_shape_, device_);
  ops::concat_channels_forward(y, xs);
  return y;
}

std::vector<Tensor> ConcatChannels::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "concat: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  std::vector<Tensor> dxs(channels_.size());
  if (!need_dx_) return dxs;
  for (size_t i = 0; i < dxs.size(); ++i)
    dxs[i] = fresh({y_shape_[0], channels_[i], y_shape_[2], y_shape_[3]}, device_);
  ops::concat_channels_backward(dxs, dy, channels_);
  return dxs;
}

Tensor AddInputs::forward(const std::vector<Tensor>& xs, bool) {
  HT_CHECK(xs.size() >= 2, "add: needs at least two inputs, got ", xs.size());
  for (const Tensor& x : xs)
    HT_CHECK(x.shape() == xs[0].shape(), "add: inputs ", shape_str(xs[0].shape()), " and ", shape_str(x.shape()),
             " differ");
  inputs_ = xs.size();
  y_shape_ = xs[0].shape();
  Tensor y = fresh(y_shape_, xs[0].device());
  ops::add(y, xs[0], xs[1]);
  for (size_t i = 2; i < xs.size(); ++i) ops::accumulate(y, xs[i]);
  return y;
}

std::vector<Tensor> AddInputs::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "add: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  return std::vector<Tensor>(inputs_, need_dx_ ? dy : Tensor());  // d(a + b)/da = 1: every input gets dy itself
}

// ---------------------------------------------------------------- Detect

Detect::Detect(ParamBuffer& pb, const std::string& name, int nc, int na, const std::vector<int>& in_channels,
               Workspace* ws)
    : nc_(nc), na_(na), no_(nc + 5) {
  HT_CHECK(nc >= 1 && na >= 1 && !in_channels.empty(), name, ": bad Detect (nc ", nc, ", na ", na, ", ",
           in_channels.size(), " levels)");
  for (size_t l = 0; l < in_channels.size(); ++l)
    m_.push_back(std::make_unique<Conv2d>(pb, name + ".m." + std::to_string(l), in_channels[l], na_ * no_, 1, 1, 0,
                                          true, ws));
}

void Detect::set_need_input_grad(bool need) {
  need_dx_ = need;
  for (auto& m : m_) m->set_need_input_grad(need);
}

void Detect::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  for (auto& m : m_) m->set_buffer_pool(pool);
}

Tensor Detect::forward(const std::vector<Tensor>& xs, bool training) {
  HT_CHECK(xs.size() == m_.size(), "detect: expected ", m_.size(), " levels, got ", xs.size());
  std::vector<Tensor> outs(xs.size());
  level_shapes_.clear();
  row_offsets_.clear();
  int64_t rows = 0;
  for (size_t l = 0; l < xs.size(); ++l) {
    outs[l] = m_[l]->forward(xs[l], training);
    level_shapes_.push_back(outs[l].shape());
    row_offsets_.push_back(rows);
    rows += int64_t(na_) * outs[l].dim(2) * outs[l].dim(3);
  }
  y_shape_ = {xs[0].dim(0), rows, no_};
  Tensor y = fresh(y_shape_, xs[0].device());
  for (size_t l = 0; l < xs.size(); ++l) {
    ops::detect_rows_forward(y, row_offsets_[l], outs[l], na_);
    outs[l] = Tensor();
  }
  return y;
}

std::vector<Tensor> Detect::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "detect: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  std::vector<Tensor> dxs(m_.size());
  for (size_t l = 0; l < m_.size(); ++l) {
    Tensor dl = fresh(level_shapes_[l], dy.device());
    ops::detect_rows_backward(dl, dy, row_offsets_[l], na_);
    dxs[l] = m_[l]->backward(dl);
  }
  return dxs;
}

}  // namespace hetrain::nn
