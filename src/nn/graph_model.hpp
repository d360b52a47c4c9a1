// nn/graph_model.hpp — a model built from a YAML file in YOLOv5's format: a directed graph of layers run in
// file order (docs/models.md).
//
// Building follows YOLOv5's parse_model (v6.x; docs/models.md): repeats scale by depth_multiple
// (max(round(n·gd), 1) when n > 1), output channels of Conv, Bottleneck, C3, SPPF, SPP by width_multiple
// (ceil(c2·gw / 8)·8, unless c2 is the Detect width na·(5 + nc)); 'nc' and 'anchors' arguments take the
// top-level values. Shapes are inferred for the configured input while building, so a mismatch (Concat of
// different spatial sizes, an input too small for a kernel, ...) is an error of Model::create naming the
// file and the entry, not of the first forward.
//
// Forward keeps a layer's output while a later layer still has to read it; backward runs the layers in
// reverse and sums the gradients of an output read by several layers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"
#include "nn/graph_yaml.hpp"
#include "nn/layer.hpp"
#include "nn/yolo_modules.hpp"

namespace hetrain::nn {

// One entry of the file as built.
struct GraphLayerInfo {
  GraphEntry entry;         // as read (from resolved, args as written)
  std::string module;       // canonical name: "Conv", "Upsample", ...
  int repeats = 1;          // number after depth_multiple
  std::string args;         // as built, YOLOv5's print: Conv [c1, c2, k, s, p], C3 [c1, c2, n, ...]
  Shape out_shape;          // per sample: [C, H, W] or [F] (Detect: [A, 5 + nc])
  int64_t param_begin = 0;  // flat offset at or before its first parameter (the padding before it is zero)
  int64_t param_count = 0;
};

class GraphModel : public Model {
 public:
  // config.name is the file's path; see ModelConfig for how num_classes and in_channels combine with it.
  explicit GraphModel(const ModelConfig& config);
  // From a file already read (tests); config.name only names the model.
  GraphModel(const GraphFile& file, const ModelConfig& config);

  // init_parameters (nn/init.hpp) in declaration order — a detector's convolutions as PyTorch's default
  // (YOLOv5's), a classifier's as the zoo's — then YOLOv5's Detect bias priors: per level of stride s,
  // objectness += log(8 / (640/s)²), each class += log(0.6 / (nc − 0.99999)). On the CPU (before to()).
  void init(uint64_t seed) override;
  // x [N, C, H, W] (the configured size) → the last layer's output: [N, A, 5 + nc] for a Detect head,
  // [N, classes] for a classifier.
  Tensor forward(const Tensor& x, bool training) override;
  using Model::backward;
  // grads_final hears, after layer i's backward, the flat offset where layer i's parameters begin: layers
  // run in file order and own consecutive parameters, so layers i.. are done with everything from there.
  void backward(const Tensor& dout, const GradsFinal& grads_final) override;
  bool has_batch_coupling() const override;
  void set_batch_norm(const BatchNormMode* mode) override { ws_.batch_norm = mode; }
  void to(Device device, Precision precision = Precision::FP32) override;
  int64_t pooled_floats() const override { return ws_.pooled_floats(); }
  int64_t activation_bytes_per_sample() override;

  const std::vector<GraphLayerInfo>& layers() const { return info_; }
  Shape output_shape() const { return info_.back().out_shape; }  // per sample
  // Strides are the image size over each Detect input's grid (the build checks they divide it exactly).
  const DetectHeadLayout* detect_head() const override { return head_ ? &*head_ : nullptr; }
  const std::string& path() const { return path_; }

 private:
  void build(const GraphFile& file);

  std::string path_;
  Workspace ws_;  // declared before the layers: they hold a pointer to it
  std::vector<GraphLayerInfo> info_;
  std::vector<std::unique_ptr<MultiInputLayer>> nodes_;
  std::vector<int> last_use_;  // per layer: the last layer that reads its output (-1: none)
  std::optional<DetectHeadLayout> head_;
  int detect_layer_ = -1;
  std::vector<Tensor> outs_, grads_;  // per layer, during forward / backward
  std::vector<char> grad_owned_;      // grads_[i] is a sum this model made (safe to add into)
  int64_t forward_batch_ = 0;
};

// Model::create for a name ending in ".yaml".
std::unique_ptr<Model> create_graph_model(const ModelConfig& config);

// True for a name Model::create sends to create_graph_model (defined in zoo.cpp).
bool is_graph_model_name(const std::string& name);

}  // namespace hetrain::nn
