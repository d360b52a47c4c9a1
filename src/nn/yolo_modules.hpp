// nn/yolo_modules.hpp — the layers of YOLOv5 (v6.x; docs/models.md) and the
// multi-input layers of a graph model (docs/models.md).
//
// Parameter names follow YOLOv5's state_dict below the prefix the graph gives ("model.<i>"):
//   Conv        <p>.conv.weight [c2, c1, k, k] (no bias), <p>.bn.{weight,bias,running_mean,running_var}
//   Bottleneck  <p>.cv1.*, <p>.cv2.*                        (cv1 1×1 to c_ = c2·e, cv2 3×3 to c2)
//   C3          <p>.cv1.*, <p>.cv2.*, <p>.cv3.*, <p>.m.<j>.cv1.*, <p>.m.<j>.cv2.*
//   SPPF        <p>.cv1.*, <p>.cv2.*
//   Detect      <p>.m.<level>.weight [na·no, c_level, 1, 1], <p>.m.<level>.bias [na·no]
// These layers call only device-agnostic entry points (src/ops/ units, the existing layer classes), so
// they run wherever their tensors are.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/layer.hpp"
#include "nn/pooling.hpp"
#include "nn/sequential.hpp"

namespace hetrain::nn {

// A layer with one or more inputs (Concat, Add, Detect; a one-input Layer through LayerNode). The contract of
// Layer (nn/layer.hpp), with a list: forward keeps what backward needs; backward returns one gradient per
// input (undefined when not needed) and accumulates parameter gradients. The returned gradients may alias
// dy or each other (Add hands dy to every input): callers read them and never write into them.
class MultiInputLayer {
 public:
  virtual ~MultiInputLayer() = default;
  virtual Tensor forward(const std::vector<Tensor>& xs, bool training) = 0;
  virtual std::vector<Tensor> backward(const Tensor& dy) = 0;
  virtual bool has_batch_coupling() const { return false; }
  virtual void set_need_input_grad(bool need) { need_dx_ = need; }
  virtual void set_buffer_pool(Workspace* pool) { pool_ = pool; }

 protected:
  // A buffer nobody else holds: from the pool, else a new tensor.
  Tensor fresh(const Shape& shape, Device device) {
    return pool_ ? pool_->acquire(shape, device) : Tensor(shape, device);
  }
  bool need_dx_ = true;
  Workspace* pool_ = nullptr;
};

// A one-input Layer as a MultiInputLayer.
class LayerNode : public MultiInputLayer {
 public:
  explicit LayerNode(std::unique_ptr<Layer> layer) : layer_(std::move(layer)) {}
  Tensor forward(const std::vector<Tensor>& xs, bool training) override;
  std::vector<Tensor> backward(const Tensor& dy) override { return {layer_->backward(dy)}; }
  bool has_batch_coupling() const override { return layer_->has_batch_coupling(); }
  void set_need_input_grad(bool need) override { layer_->set_need_input_grad(need); }
  void set_buffer_pool(Workspace* pool) override { layer_->set_buffer_pool(pool); }
  Layer& layer() { return *layer_; }

 private:
  std::unique_ptr<Layer> layer_;
};

// Layers made elsewhere, run in a chain (a repeated graph entry: YOLOv5's nn.Sequential of n copies).
class LayerChain : public Layer {
 public:
  void add(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override;
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

// YOLOv5's Conv: conv k×k, stride s, padding p (autopad: k/2), no bias → BatchNorm2d (eps 1e-3, momentum
// 0.03, as YOLOv5's initialize_weights sets) → SiLU (left out when act is false).
class YoloConv : public Sequential {
 public:
  YoloConv(ParamBuffer& pb, const std::string& name, int c1, int c2, int k, int s, int p, bool act, Workspace* ws);
  static constexpr float kBnEps = 1e-3f, kBnMomentum = 0.03f;
};

// YOLOv5's Bottleneck: y = cv2(cv1(x)) (+ x when shortcut and c1 == c2); cv1 1×1 c1 → c_ = int(c2·e),
// cv2 3×3 c_ → c2.
class YoloBottleneck : public Layer {
 public:
  YoloBottleneck(ParamBuffer& pb, const std::string& name, int c1, int c2, bool shortcut, double e, Workspace* ws);
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;
  bool adds_shortcut() const { return add_; }

 private:
  YoloConv cv1_, cv2_;
  bool add_;
  Tensor y_;  // own output buffer when there is no pool
};

// YOLOv5's C3: cv3(concat(m(cv1(x)), cv2(x))); cv1, cv2 1×1 c1 → c_ = int(c2·e); m = n Bottlenecks
// c_ → c_ (e = 1.0); cv3 1×1 2c_ → c2.
class C3 : public Layer {
 public:
  C3(ParamBuffer& pb, const std::string& name, int c1, int c2, int n, bool shortcut, double e, Workspace* ws);
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;

 private:
  int c_;
  YoloConv cv1_, cv2_, cv3_;
  Sequential m_;
  Tensor cat_;  // own concat buffer when there is no pool
};

// YOLOv5's SPPF: x1 = cv1(x) (1×1 c1 → c_ = c1/2); y1, y2, y3 = three chained k×k stride-1 max pools
// (padding k/2); cv2(concat(x1, y1, y2, y3)) (1×1 4c_ → c2). Equal to SPP with kernels k, 2k−1, 3k−2.
class SPPF : public Layer {
 public:
  SPPF(ParamBuffer& pb, const std::string& name, int c1, int c2, int k, Workspace* ws);
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;

 private:
  int c_;
  YoloConv cv1_, cv2_;
  MaxPool2d m1_, m2_, m3_;
  Tensor cat_;  // own concat buffer when there is no pool
};

// nn.Upsample(scale_factor=f, mode='nearest'), f a positive integer (ops/upsample).
class UpsampleNearest : public Layer {
 public:
  explicit UpsampleNearest(int factor) : f_(factor) {}
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

 private:
  int f_;
  Shape in_shape_;
  Tensor y_, dx_;  // own buffers when there is no pool
};

// YOLOv5's Concat(1): the inputs' channels in order (ops/concat).
class ConcatChannels : public MultiInputLayer {
 public:
  Tensor forward(const std::vector<Tensor>& xs, bool training) override;
  std::vector<Tensor> backward(const Tensor& dy) override;

 private:
  std::vector<int64_t> channels_;
  Shape y_shape_;
  Device device_ = Device::CPU;
};

// Element-wise sum of inputs of one shape (a residual connection written in the file).
class AddInputs : public MultiInputLayer {
 public:
  Tensor forward(const std::vector<Tensor>& xs, bool training) override;
  std::vector<Tensor> backward(const Tensor& dy) override;

 private:
  size_t inputs_ = 0;
  Shape y_shape_;
};

// YOLOv5's Detect in training form: per level l a 1×1 conv with bias c_l → na·no (no = 5 + nc), then
// every level's predictions as rows of out [N, A, no], A = Σ na·H_l·W_l, ordered level, anchor, y, x
// (ops/detect_rows). No sigmoid, no decoding: the loss and the decoder take these raw outputs.
class Detect : public MultiInputLayer {
 public:
  Detect(ParamBuffer& pb, const std::string& name, int nc, int na, const std::vector<int>& in_channels,
         Workspace* ws);
  Tensor forward(const std::vector<Tensor>& xs, bool training) override;
  std::vector<Tensor> backward(const Tensor& dy) override;
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;
  int outputs_per_anchor() const { return no_; }

 private:
  int nc_, na_, no_;
  std::vector<std::unique_ptr<Conv2d>> m_;
  std::vector<Shape> level_shapes_;  // each conv's output [N, na·no, H, W] of the last forward
  std::vector<int64_t> row_offsets_;
  Shape y_shape_;
};

}  // namespace hetrain::nn
