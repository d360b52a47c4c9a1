// nn/zoo.cpp — the model zoo: mlp, lenet, resnet20 (CIFAR), resnet18 and resnet50 (torchvision layout).
//
// Each model is a Sequential of layers whose parameters live in the Model's ParamBuffer. Minimum input
// sizes: lenet needs 12×12 (its second 5×5 conv and two 2×2 pools must leave at least 1×1); each ResNet
// needs at least its total stride (resnet20: 4, resnet18/50: 32) so that the last stage is at least 1×1.
#include <algorithm>
#include <sstream>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/graph_model.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/pooling.hpp"
#include "nn/unary_layer.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"

namespace hetrain::nn {

namespace {

struct ZooEntry {
  const char* name;
  int min_size;  // minimum height and width
};
const ZooEntry kZoo[] = {{"mlp", 1}, {"lenet", 12}, {"resnet20", 4}, {"resnet18", 32}, {"resnet50", 32}};

void build_mlp(Sequential& net, ParamBuffer& pb, const ModelConfig& c) {
  net.add<Flatten>();
  net.add<Linear>(pb, "fc1", c.in_channels * c.height * c.width, 256);
  net.add<ReLU>();
  net.add<Linear>(pb, "fc2", 256, 128);
  net.add<ReLU>();
  net.add<Linear>(pb, "fc3", 128, c.num_classes);
}

void build_lenet(Sequential& net, ParamBuffer& pb, Workspace* ws, const ModelConfig& c) {
  int h = c.height, w = c.width;
  net.add<Conv2d>(pb, "conv1", c.in_channels, 6, 5, 1, 2, true, ws);  // same size
  net.add<ReLU>();
  net.add<MaxPool2d>(2, 2, 0);
  h = MaxPool2d::out_size(h, 2, 2, 0), w = MaxPool2d::out_size(w, 2, 2, 0);
  net.add<Conv2d>(pb, "conv2", 6, 16, 5, 1, 0, true, ws);
  h = Conv2d::out_size(h, 5, 1, 0), w = Conv2d::out_size(w, 5, 1, 0);
  net.add<ReLU>();
  net.add<MaxPool2d>(2, 2, 0);
  h = MaxPool2d::out_size(h, 2, 2, 0), w = MaxPool2d::out_size(w, 2, 2, 0);
  net.add<Flatten>();
  net.add<Linear>(pb, "fc1", 16 * h * w, 120);
  net.add<ReLU>();
  net.add<Linear>(pb, "fc2", 120, 84);
  net.add<ReLU>();
  net.add<Linear>(pb, "fc3", 84, c.num_classes);
}

// One stage "layerI" of `blocks` residual blocks; the first block takes the stride. Returns the new
// number of channels.
template <typename Block>
int add_stage(Sequential& net, ParamBuffer& pb, Workspace* ws, int index, int in, int planes, int blocks,
              int stride) {
  const std::string stage = "layer" + std::to_string(index);
  for (int b = 0; b < blocks; ++b) {
    net.add<Block>(pb, stage + "." + std::to_string(b), in, planes, b == 0 ? stride : 1, ws);
    in = planes * Block::kExpansion;
  }
  return in;
}

// He et al. 2016, CIFAR variant (6n+2 layers, n = 3), with 1×1 conv + BN projection shortcuts (option B).
void build_resnet20(Sequential& net, ParamBuffer& pb, Workspace* ws, const ModelConfig& c) {
  net.add<Conv2d>(pb, "conv1", c.in_channels, 16, 3, 1, 1, false, ws);
  net.add<BatchNorm2d>(pb, "bn1", 16);
  net.add<ReLU>();
  int ch = add_stage<BasicBlock>(net, pb, ws, 1, 16, 16, 3, 1);
  ch = add_stage<BasicBlock>(net, pb, ws, 2, ch, 32, 3, 2);
  ch = add_stage<BasicBlock>(net, pb, ws, 3, ch, 64, 3, 2);
  net.add<GlobalAvgPool>();
  net.add<Linear>(pb, "fc", ch, c.num_classes);
}

// torchvision.models.resnet18 / resnet50 (v1.5: a Bottleneck's stride sits on its 3×3 conv).
template <typename Block>
void build_imagenet_resnet(Sequential& net, ParamBuffer& pb, Workspace* ws, const ModelConfig& c,
                           const int (&blocks)[4]) {
  net.add<Conv2d>(pb, "conv1", c.in_channels, 64, 7, 2, 3, false, ws);
  net.add<BatchNorm2d>(pb, "bn1", 64);
  net.add<ReLU>();
  net.add<MaxPool2d>(3, 2, 1);
  int ch = add_stage<Block>(net, pb, ws, 1, 64, 64, blocks[0], 1);
  ch = add_stage<Block>(net, pb, ws, 2, ch, 128, blocks[1], 2);
  ch = add_stage<Block>(net, pb, ws, 3, ch, 256, blocks[2], 2);
  ch = add_stage<Block>(net, pb, ws, 4, ch, 512, blocks[3], 2);
  net.add<GlobalAvgPool>();
  net.add<Linear>(pb, "fc", ch, c.num_classes);
}

class ZooModel : public Model {
 public:
  explicit ZooModel(const ModelConfig& c) : Model(c) {
    net_.track_param_offsets(&params_);  // backward can then say which gradients are final (GradsFinal)
    if (c.name == "mlp") {
      build_mlp(net_, params_, c);
    } else if (c.name == "lenet") {
      build_lenet(net_, params_, &ws_, c);
    } else if (c.name == "resnet20") {
      build_resnet20(net_, params_, &ws_, c);
    } else if (c.name == "resnet18") {
      build_imagenet_resnet<BasicBlock>(net_, params_, &ws_, c, {2, 2, 2, 2});
    } else {  // resnet50; the name was validated by create()
      build_imagenet_resnet<Bottleneck>(net_, params_, &ws_, c, {3, 4, 6, 3});
    }
    net_.set_need_input_grad(false);  // nobody needs the gradient of the input images
    net_.set_buffer_pool(&ws_);       // activations and gradients share one pool
    params_.finalize();
  }

  void init(uint64_t seed) override { init_parameters(params_, seed); }

  Tensor forward(const Tensor& x, bool training) override {
    const ModelConfig& c = config_;
    HT_CHECK(x.ndim() == 4 && x.dim(0) >= 1 && x.dim(1) == c.in_channels && x.dim(2) == c.height &&
                 x.dim(3) == c.width,
             c.name, ": expected input [N, ", c.in_channels, ", ", c.height, ", ", c.width, "] with N >= 1, got ",
             shape_str(x.shape()));
    HT_CHECK(x.device() == device(), c.name, ": input on ", device_name(x.device()), ", model on ",
             device_name(device()));
    forward_batch_ = x.dim(0);
    if (training) ws_.begin_step();
    return net_.forward(x, training);
  }

  using Model::backward;
  void backward(const Tensor& dlogits, const GradsFinal& grads_final) override {
    HT_CHECK(forward_batch_ > 0, config_.name, ": backward() before forward()");
    HT_CHECK(dlogits.ndim() == 2 && dlogits.dim(0) == forward_batch_ && dlogits.dim(1) == config_.num_classes,
             config_.name, ": expected dlogits [", forward_batch_, ", ", config_.num_classes, "], got ",
             shape_str(dlogits.shape()));
    net_.backward(dlogits, grads_final);
  }

  bool has_batch_coupling() const override { return net_.has_batch_coupling(); }
  void set_batch_norm(const BatchNormMode* mode) override { ws_.batch_norm = mode; }

  void to(Device device, Precision precision) override {
    params_.to(device);
    ws_.release_all();  // pooled buffers of the old device
    ws_.precision = precision;
  }

  int64_t pooled_floats() const override { return ws_.pooled_floats(); }

  int64_t activation_bytes_per_sample() override { return measure_activation_bytes_per_sample(*this, ws_); }

 private:
  Workspace ws_;  // declared before net_: layers hold a pointer to it
  Sequential net_;
  int64_t forward_batch_ = 0;
};

}  // namespace

bool is_graph_model_name(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
}

std::vector<std::string> Model::names() {
  std::vector<std::string> out;
  for (const auto& e : kZoo) out.push_back(e.name);
  return out;
}

std::unique_ptr<Model> Model::create(const ModelConfig& config) {
  if (is_graph_model_name(config.name)) {  // a YAML file (docs/models.md)
    return create_graph_model(config);
  }
  const ZooEntry* entry = nullptr;
  for (const auto& e : kZoo)
    if (config.name == e.name) entry = &e;
  if (!entry) {
    std::ostringstream known;
    for (const auto& e : kZoo) known << (&e == kZoo ? "" : ", ") << e.name;
    HT_THROW("unknown model ", quoted(config.name), " (known: ", known.str(), ", or a model file ending in .yaml)");
  }
  HT_CHECK(config.in_channels >= 1, config.name, ": in_channels must be >= 1, got ", config.in_channels);
  HT_CHECK(config.num_classes >= 1, config.name, ": num_classes must be >= 1, got ", config.num_classes);
  HT_CHECK(config.height >= entry->min_size && config.width >= entry->min_size, config.name,
           ": input must be at least ", entry->min_size, "×", entry->min_size, ", got ", config.height, "×",
           config.width);
  return std::make_unique<ZooModel>(config);
}

}  // namespace hetrain::nn
