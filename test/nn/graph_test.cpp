// Graph models from YAML files (docs/models.md): the shipped models' parameter counts against ultralytics
// YOLOv5 v6.x's model summaries, names, scaling, Detect's output and head, the classifier files against
// the zoo, every bad-input message, a training step of yolov5n, describe_graph_model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "nn/graph_model.hpp"
#include "nn/graph_yaml.hpp"
#include "nn/init.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;
using test::shape_of;

namespace {

// The repository's models/ folder (tests run from the repository root; __FILE__ covers other places).
std::string model_file(const std::string& name) {
  std::string here = __FILE__;  // .../test/nn/graph_test.cpp
  std::string root = here.find('/') == std::string::npos ? "." : here.substr(0, here.rfind("/test/nn/"));
  if (root.empty() || here[0] != '/') root = ".";
  return root + "/models/" + name;
}

ModelConfig cfg(const std::string& name, int c, int hw, int classes) {
  ModelConfig m;
  m.name = name, m.in_channels = c, m.height = hw, m.width = hw, m.num_classes = classes;
  return m;
}

std::unique_ptr<GraphModel> graph(const std::string& file, int hw, int classes = 80, int c = 3) {
  return std::make_unique<GraphModel>(cfg(model_file(file), c, hw, classes));
}

// The message of the hetrain::Error that building `text` (named "models/x.yaml") throws; "" when none.
std::string error_of(const std::string& text, int hw = 64, int classes = 0, int c = 3) {
  try {
    GraphModel m(parse_graph_text(text, "models/x.yaml"), cfg("models/x.yaml", c, hw, classes));
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}


// A small, valid detector head on two levels (from layers 0 and 1), for the error cases to vary.
const char* kTiny = R"(
nc: 2
anchors: [[10,13, 16,30], [30,61, 62,45]]
backbone:
  - [-1, 1, Conv, [8, 3, 2]]
  - [-1, 1, Conv, [16, 3, 2]]
head:
  - [[0, 1], 1, Detect, [nc, anchors]]
)";

}  // namespace

// ultralytics YOLOv5 v6.x prints these in its model summary (nc=80, 640×640); the same
// counts are sum(p.numel() for p in model.parameters()).
TEST(GraphModel, YoloParameterCountsMatchUltralytics) {
  EXPECT_EQ(graph("yolov5n.yaml", 640)->param_count(), 1872157);
  EXPECT_EQ(graph("yolov5s.yaml", 640)->param_count(), 7235389);
  EXPECT_EQ(graph("yolov5m.yaml", 640)->param_count(), 21190557);
}

TEST(GraphModel, YoloScalingFollowsParseModel) {
  // depth: C3 repeats 3, 6, 9 → round(n·0.33) = 1, 2, 3 (s) and round(n·0.67) = 2, 4, 6 (m)
  auto s = graph("yolov5s.yaml", 640);
  auto m = graph("yolov5m.yaml", 640);
  EXPECT_EQ(s->layers()[2].repeats, 1);
  EXPECT_EQ(s->layers()[4].repeats, 2);
  EXPECT_EQ(s->layers()[6].repeats, 3);
  EXPECT_EQ(m->layers()[2].repeats, 2);
  EXPECT_EQ(m->layers()[4].repeats, 4);
  EXPECT_EQ(m->layers()[6].repeats, 6);
  // width: 64 → 16 (n), 32 (s), 48 (m); 1024 → 256, 512, 768
  EXPECT_EQ(graph("yolov5n.yaml", 640)->layers()[0].out_shape, (Shape{16, 320, 320}));
  EXPECT_EQ(s->layers()[0].out_shape, (Shape{32, 320, 320}));
  EXPECT_EQ(m->layers()[9].out_shape, (Shape{768, 20, 20}));
  EXPECT_EQ(s->layers()[12].out_shape, (Shape{512, 40, 40}));  // Concat of 256 + 256
  EXPECT_EQ(s->layers()[0].args, "[3, 32, 6, 2, 2]");          // YOLOv5's printed args
  EXPECT_EQ(s->layers()[13].args, "[512, 256, 1, False]");
  EXPECT_EQ(s->layers()[2].param_count, 18816);  // ultralytics' table: layer 2, C3, 18816
  EXPECT_EQ(s->layers()[9].param_count, 656896);  // SPPF
  EXPECT_EQ(s->layers()[24].param_count, 229245);  // Detect
}

TEST(GraphModel, YoloStateDictNames) {
  auto m = graph("yolov5s.yaml", 640);
  const ParamBuffer& pb = m->params();
  EXPECT_EQ(pb.specs().front().name, "model.0.conv.weight");
  EXPECT_EQ(pb.specs().back().name, "model.24.m.2.bias");
  EXPECT_EQ(shape_of(pb, "model.0.conv.weight"), (Shape{32, 3, 6, 6}));
  EXPECT_EQ(shape_of(pb, "model.0.bn.weight"), (Shape{32}));
  EXPECT_EQ(shape_of(pb, "model.0.bn.bias"), (Shape{32}));
  EXPECT_EQ(shape_of(pb, "model.2.cv1.conv.weight"), (Shape{32, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "model.2.cv3.conv.weight"), (Shape{64, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "model.2.m.0.cv2.conv.weight"), (Shape{32, 32, 3, 3}));
  EXPECT_EQ(shape_of(pb, "model.4.m.1.cv1.bn.weight"), (Shape{64}));
  EXPECT_EQ(shape_of(pb, "model.9.cv1.conv.weight"), (Shape{256, 512, 1, 1}));
  EXPECT_EQ(shape_of(pb, "model.9.cv2.conv.weight"), (Shape{512, 1024, 1, 1}));
  EXPECT_EQ(shape_of(pb, "model.24.m.0.weight"), (Shape{255, 128, 1, 1}));
  EXPECT_EQ(shape_of(pb, "model.24.m.2.bias"), (Shape{255}));
  EXPECT_EQ(pb.find("model.24.m.0.conv.weight"), -1);
  EXPECT_GE(pb.find_state("model.0.bn.running_mean"), 0);
  EXPECT_GE(pb.find_state("model.23.m.0.cv2.bn.running_var"), 0);
  // YOLOv5's C3 declares cv1, cv2, cv3, then m: its state_dict lists them in that order
  EXPECT_LT(pb.find("model.2.cv3.bn.bias"), pb.find("model.2.m.0.cv1.conv.weight"));
  EXPECT_TRUE(m->has_batch_coupling());
}

TEST(GraphModel, DetectOutputAndHeadAt640) {
  auto m = graph("yolov5n.yaml", 640);
  EXPECT_EQ(m->output_shape(), (Shape{25200, 85}));
  const DetectHeadLayout* h = m->detect_head();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->num_classes, 80);
  EXPECT_EQ(h->anchors_per_level, 3);
  EXPECT_EQ(h->strides, (std::vector<int>{8, 16, 32}));
  EXPECT_EQ(h->anchors, (std::vector<float>{10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373,
                                            326}));
  EXPECT_EQ(h->image_h, 640);
  EXPECT_EQ(h->image_w, 640);
  m->init(1);
  Tensor x({1, 3, 640, 640});
  test::fill_uniform(x, 3, 0.0f, 1.0f);
  const Tensor y = m->forward(x, false);
  EXPECT_EQ(y.shape(), (Shape{1, 25200, 85}));
}

TEST(GraphModel, NonSquareInputAndOtherClasses) {
  ModelConfig c = cfg(model_file("yolov5s.yaml"), 3, 0, 7);
  c.height = 96, c.width = 160;
  GraphModel m(c);
  EXPECT_EQ(m.config().num_classes, 7);
  EXPECT_EQ(m.output_shape(), (Shape{3 * (12 * 20 + 6 * 10 + 3 * 5), 12}));
  EXPECT_EQ(m.detect_head()->strides, (std::vector<int>{8, 16, 32}));
  // only Detect's width depends on nc: 3·(5 + nc) outputs per level
  EXPECT_EQ(m.param_count(), 7235389 - (128 + 256 + 512 + 3) * 255 + (128 + 256 + 512 + 3) * 36);
  // num_classes 0 takes the file's nc
  c.num_classes = 0;
  EXPECT_EQ(GraphModel(c).config().num_classes, 80);
}

TEST(GraphModel, DetectBiasPriors) {
  auto a = graph("yolov5n.yaml", 64, 80);
  a->init(5);
  auto b = graph("yolov5n.yaml", 64, 80);
  init_parameters(b->params(), 5, ConvInit::PyTorchDefault);  // the same without the priors
  const int no = 85;
  for (int l = 0; l < 3; ++l) {
    const std::string name = "model.24.m." + std::to_string(l) + ".bias";
    const Tensor pa = a->params().param(a->params().find(name)), pb = b->params().param(b->params().find(name));
    const double s = 8 << l;
    for (int an = 0; an < 3; ++an) {
      EXPECT_NEAR(pa[an * no + 4] - pb[an * no + 4], std::log(8.0 / ((640 / s) * (640 / s))), 1e-5) << name;
      EXPECT_NEAR(pa[an * no + 0] - pb[an * no + 0], 0.0, 0.0) << name;
      EXPECT_NEAR(pa[an * no + 5 + 17] - pb[an * no + 5 + 17], std::log(0.6 / (80 - 0.99999)), 1e-5) << name;
    }
  }
  // everything else is init_parameters' (same seed, same declaration order)
  const int w = a->params().find("model.23.cv3.conv.weight");
  EXPECT_EQ(a->params().param(w)[7], b->params().param(w)[7]);
}

// A detector's convolutions start as PyTorch's default, as YOLOv5's do: U(−1/√fan_in, 1/√fan_in), fan_in =
// C·R·S (std bound/√3); a classifier file keeps the zoo's Kaiming normal (the *FileIsTheZoo* tests).
TEST(GraphModel, DetectorConvolutionsUsePyTorchsDefault) {
  auto m = graph("yolov5n.yaml", 64, 10);
  m->init(9);
  const ParamBuffer& pb = m->params();
  const Tensor w = pb.param(pb.find("model.6.m.0.cv2.conv.weight"));  // a 3×3 conv of C3 in the backbone
  ASSERT_EQ(w.ndim(), 4);
  const double bound = 1.0 / std::sqrt(double(w.dim(1) * w.dim(2) * w.dim(3)));
  double sq = 0, maxabs = 0;
  for (int64_t i = 0; i < w.numel(); ++i) sq += double(w[i]) * w[i], maxabs = std::max(maxabs, std::fabs(double(w[i])));
  const double stddev = std::sqrt(sq / double(w.numel()));
  EXPECT_LE(maxabs, bound);
  EXPECT_GT(maxabs, 0.99 * bound);
  EXPECT_NEAR(stddev, bound / std::sqrt(3.0), 0.03 * bound);
  // The Detect convs' weights too (their biases carry the priors on top of the default).
  const Tensor d = pb.param(pb.find("model.24.m.0.weight"));
  for (int64_t i = 0; i < d.numel(); ++i) ASSERT_LE(std::fabs(d[i]), 1.0 / std::sqrt(double(d.dim(1))));
}

TEST(GraphModel, Yolov5nTrainingStepAt64OnCpu) {
  auto m = graph("yolov5n.yaml", 64, 3);
  m->init(7);
  Tensor x({2, 3, 64, 64});
  test::fill_uniform(x, 8, 0.0f, 1.0f);
  const Tensor y = m->forward(x, true);
  ASSERT_EQ(y.shape(), (Shape{2, 3 * (8 * 8 + 4 * 4 + 2 * 2), 8}));
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
  Tensor dy(y.shape());
  test::fill_uniform(dy, 9);
  m->params().grads().zero();
  std::vector<int64_t> finals;
  m->backward(dy, [&](int64_t first) { finals.push_back(first); });
  ASSERT_FALSE(finals.empty());
  EXPECT_EQ(finals.back(), 0);
  for (size_t i = 1; i < finals.size(); ++i) EXPECT_LE(finals[i], finals[i - 1]);
  const Tensor& g = m->params().grads();
  int64_t nonzero = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << i;
    nonzero += g[i] != 0.0f;
  }
  EXPECT_GT(nonzero, g.numel() * 9 / 10);
  // every parameter tensor gets a gradient (the stem's included: the first layer's input needs none)
  for (const ParamSpec& s : m->params().specs()) {
    double sum = 0;
    for (int64_t j = 0; j < s.numel(); ++j) sum += std::fabs(g[s.offset + j]);
    EXPECT_GT(sum, 0.0) << s.name;
  }
  // a second step gives the same output (buffers come back from the pool)
  const Tensor y1 = y.clone();
  const Tensor y2 = m->forward(x, true);
  for (int64_t i = 0; i < y2.numel(); i += 97) ASSERT_EQ(y1[i], y2[i]) << i;
  m->backward(dy);
  EXPECT_GT(m->pooled_floats(), 0);
  const Tensor states = m->params().states().clone();
  m->params().grads().zero();
  EXPECT_GT(m->activation_bytes_per_sample(), 0);
  for (int64_t i = 0; i < states.numel(); ++i) ASSERT_EQ(states[i], m->params().states()[i]);
  for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(m->params().grads()[i], 0.0f);
}

// 80 classes give each Detect bias 255 floats: every parameter must still start on a 64-float boundary
// (cuDNN and cuBLAS take each view as its own tensor), and the padding between parameters must stay zero
// through a training step with momentum and weight decay (the flat reductions and checkpoints rely on it).
TEST(GraphModel, ParametersAlignedAndPaddingStaysZero) {
  auto m = graph("yolov5n.yaml", 64, 80);
  m->init(3);
  const ParamBuffer& pb = m->params();
  std::vector<char> is_param(size_t(pb.count()), 0);
  for (const ParamSpec& s : pb.specs()) {
    ASSERT_EQ(s.offset % ParamBuffer::kParamAlignment, 0) << s.name;
    for (int64_t j = 0; j < s.numel(); ++j) is_param[size_t(s.offset + j)] = 1;
  }
  EXPECT_EQ(m->param_count(), 1872157);  // ultralytics' count: the padding is not a parameter
  EXPECT_GT(pb.count(), pb.parameters());
  optim::SgdConfig sc;
  sc.weight_decay = 5e-4f;
  optim::Sgd sgd(pb, sc);
  Tensor x({2, 3, 64, 64});
  test::fill_uniform(x, 8, 0.0f, 1.0f);
  for (int step = 0; step < 2; ++step) {
    const Tensor y = m->forward(x, true);
    Tensor dy(y.shape());
    test::fill_uniform(dy, 9 + step);
    m->params().grads().zero();
    m->backward(dy);
    sgd.step(m->params(), 0.01f);
  }
  int64_t padding = 0;
  for (int64_t i = 0; i < pb.count(); ++i) {
    if (is_param[size_t(i)]) continue;
    ++padding;
    ASSERT_EQ(m->params().values()[i], 0.0f) << i;
    ASSERT_EQ(m->params().grads()[i], 0.0f) << i;
    ASSERT_EQ(sgd.momentum_buffer()[i], 0.0f) << i;
  }
  EXPECT_EQ(padding, pb.count() - pb.parameters());
}

TEST(GraphModel, CreateDispatchesYamlNames) {
  auto m = Model::create(cfg(model_file("yolov5n.yaml"), 3, 64, 4));
  EXPECT_NE(m->detect_head(), nullptr);
  EXPECT_EQ(m->config().num_classes, 4);
  auto lenet = Model::create(cfg(model_file("lenet.yaml"), 1, 28, 10));
  EXPECT_EQ(lenet->detect_head(), nullptr);
  try {
    Model::create(cfg("no/such/model.yaml", 3, 64, 4));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "no/such/model.yaml: cannot open the model file");
  }
}

// The classifier files give the zoo's models: same parameter count, and with the same parameters the
// same logits and gradients (the layers are the zoo's).
void expect_same_as_zoo(const std::string& file, const std::string& zoo, int c, int hw, int classes, bool copy) {
  SCOPED_TRACE(file);
  auto g = Model::create(cfg(model_file(file), c, hw, classes));
  auto z = Model::create(cfg(zoo, c, hw, classes));
  ASSERT_EQ(g->param_count(), z->param_count());
  ASSERT_EQ(g->params().specs().size(), z->params().specs().size());
  for (size_t i = 0; i < g->params().specs().size(); ++i)
    ASSERT_EQ(g->params().specs()[i].shape, z->params().specs()[i].shape) << g->params().specs()[i].name;
  z->init(3);
  if (copy) {
    g->params().values().copy_from(z->params().values());
  } else {
    g->init(3);  // same declaration order and kinds: the same draws
  }
  Tensor x({3, c, hw, hw}), r({3, classes});
  test::fill_uniform(x, 4);
  test::fill_uniform(r, 5);
  const Tensor yg = g->forward(x, true).clone(), yz = z->forward(x, true).clone();
  for (int64_t i = 0; i < yz.numel(); ++i) ASSERT_EQ(yg[i], yz[i]) << i;
  g->params().grads().zero();
  z->params().grads().zero();
  g->backward(r);
  z->backward(r);
  for (int64_t i = 0; i < z->params().grads().numel(); ++i)
    ASSERT_EQ(g->params().grads()[i], z->params().grads()[i]) << i;
}

TEST(GraphModel, LenetFileIsTheZooLenet) {
  EXPECT_EQ(Model::create(cfg(model_file("lenet.yaml"), 1, 28, 10))->param_count(),
            (6 * 25 + 6) + (16 * 6 * 25 + 16) + (16 * 5 * 5 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10));
  expect_same_as_zoo("lenet.yaml", "lenet", 1, 28, 10, /*copy=*/true);
  expect_same_as_zoo("lenet.yaml", "lenet", 3, 32, 7, /*copy=*/false);
}

TEST(GraphModel, Resnet20FileIsTheZooResnet20) {
  EXPECT_EQ(Model::create(cfg(model_file("resnet20.yaml"), 3, 32, 10))->param_count(), 272474);
  expect_same_as_zoo("resnet20.yaml", "resnet20", 3, 8, 4, /*copy=*/false);
}

TEST(GraphModel, MlpFileIsTheZooMlp) { expect_same_as_zoo("mlp.yaml", "mlp", 2, 5, 4, /*copy=*/false); }

// ultralytics' own layout (flow lists with trailing commas, `nn.Upsample`, plain None/False) reads the same.
TEST(GraphModel, UltralyticsFlowLayoutReads) {
  const char* text = R"(
# Parameters
nc: 80  # number of classes
depth_multiple: 0.33
width_multiple: 0.50
anchors:
  - [10,13, 16,30, 33,23]  # P3/8
  - [30,61, 62,45, 59,119]  # P4/16
  - [116,90, 156,198, 373,326]  # P5/32
backbone:
  [[-1, 1, Conv, [64, 6, 2, 2]],
   [-1, 1, Conv, [128, 3, 2]],
   [-1, 3, C3, [128]],
   [-1, 1, Conv, [256, 3, 2]],
   [-1, 6, C3, [256]],
   [-1, 1, Conv, [512, 3, 2]],
   [-1, 9, C3, [512]],
   [-1, 1, Conv, [1024, 3, 2]],
   [-1, 3, C3, [1024]],
   [-1, 1, SPPF, [1024, 5]],
  ]
head:
  [[-1, 1, Conv, [512, 1, 1]],
   [-1, 1, nn.Upsample, [None, 2, 'nearest']],
   [[-1, 6], 1, Concat, [1]],
   [-1, 3, C3, [512, False]],
   [-1, 1, Conv, [256, 1, 1]],
   [-1, 1, nn.Upsample, [None, 2, 'nearest']],
   [[-1, 4], 1, Concat, [1]],
   [-1, 3, C3, [256, False]],
   [-1, 1, Conv, [256, 3, 2]],
   [[-1, 14], 1, Concat, [1]],
   [-1, 3, C3, [512, False]],
   [-1, 1, Conv, [512, 3, 2]],
   [[-1, 10], 1, Concat, [1]],
   [-1, 3, C3, [1024, False]],
   [[17, 20, 23], 1, Detect, [nc, anchors]],
  ]
)";
  GraphModel m(parse_graph_text(text, "yolov5s-ultralytics.yaml"), cfg("yolov5s-ultralytics.yaml", 3, 640, 80));
  EXPECT_EQ(m.param_count(), 7235389);
  const GraphFile f = parse_graph_text(text, "x.yaml");
  EXPECT_EQ(f.layers[11].args[0].kind, GraphArg::Kind::None);
  EXPECT_EQ(f.layers[11].args[2].kind, GraphArg::Kind::String);
  EXPECT_EQ(f.layers[13].args[1].kind, GraphArg::Kind::Bool);
  EXPECT_EQ(f.layers[24].from, (std::vector<int>{17, 20, 23}));
  EXPECT_EQ(f.layers[12].from, (std::vector<int>{11, 6}));
}

TEST(GraphModel, DescribeListsLayersAndTotals) {
  ModelConfig c = cfg("", 0, 640, 0);  // channels and classes from the file
  const std::string t = describe_graph_model(model_file("yolov5s.yaml"), c);
  EXPECT_NE(t.find("7235389 parameters"), std::string::npos) << t;
  EXPECT_NE(t.find("SPPF"), std::string::npos);
  EXPECT_NE(t.find("[-1, 6]"), std::string::npos);
  EXPECT_NE(t.find("[25200, 85]"), std::string::npos);
  EXPECT_NE(t.find("strides 8 (80×80 grid), 16 (40×40 grid), 32 (20×20 grid)"), std::string::npos) << t;
  EXPECT_NE(t.find("[3, 32, 6, 2, 2]"), std::string::npos);
  std::printf("%s", t.c_str());
}

// A count of values as an error message prints it (a double, 6 significant digits).
std::string values_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Every bad input gives one line naming the file and the entry.
TEST(GraphModel, BadInputsGiveOneLineErrors) {
  struct Case {
    std::string text, expected;
    int hw = 64;
  };
  const std::string tiny = kTiny;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = tiny;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv3, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): unknown module 'Conv3' (known: Conv, Bottleneck, C3, SPPF, "
       "Upsample, Concat, Detect, Conv2d, BatchNorm2d, ReLU, SiLU, MaxPool2d, AvgPool2d, GlobalAvgPool, Flatten, "
       "Linear, Add, BasicBlock, ResBottleneck)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[2, 1, Conv, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): from 2 points forward (a layer takes outputs of layers 0..0 only)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[1, 1, Conv, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): from 1 points at the layer itself (a layer takes outputs of layers "
       "0..0 only)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-3, 1, Conv, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): from -3 points before the first layer"},
      {with("[-1, 1, Conv, [8, 3, 2]]", "[-2, 1, Conv, [8, 3, 2]]"),
       "models/x.yaml: backbone[0] (layer 0): from -2 points before the first layer (layer 0 takes the input: "
       "from -1)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [16, 3, 2, 1, 1, True, 5]]"),
       "models/x.yaml: backbone[1] (layer 1): Conv [c2, k=1, s=1, p=None, g=1, act=True] takes 1 to 6 args, got 7"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, []]"),
       "models/x.yaml: backbone[1] (layer 1): Conv [c2, k=1, s=1, p=None, g=1, act=True] takes 1 to 6 args, got 0"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [16, 3, two]]"),
       "models/x.yaml: backbone[1] (layer 1): Conv arg 2 (s) must be an integer >= 1, got 'two'"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [16, 3, 2, None, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): Conv arg 4 (g) must be 1 (grouped convolutions are not supported), "
       "got 2"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, 16]"),
       "models/x.yaml: backbone[1] (layer 1): args must be a list, e.g. [64, 3, 2], got '16' (line 6)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv]"),
       "models/x.yaml: backbone[1] (layer 1): expected [from, number, module, args], got 3 items (line 6)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 0, Conv, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): number must be >= 1, got 0"},
      {with("nc: 2\n", ""), "models/x.yaml: missing key 'nc'"},
      {with("backbone:", "backbones:"), "models/x.yaml: unknown key 'backbones' (line 4) (known: nc, depth_multiple, "
                                        "width_multiple, anchors, ch, backbone, head)"},
      {with("nc: 2", "nc: two"), "models/x.yaml: nc must be an integer, got 'two' (line 2)"},
      {with("[[10,13, 16,30], [30,61, 62,45]]", "[[10,13, 16,30], [30,61, 62]]"),
       "models/x.yaml: anchors[1]: expected w,h pairs (an even number of values), got 3 values (line 3)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Detect, [nc, 2]]"),
       "models/x.yaml: head[0] (layer 2): Detect anchors given as a count (2 per level): hetrain does not compute "
       "anchors (no AutoAnchor): write them as lists of w,h pixel pairs, one list per level"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Detect, [5, anchors]]"),
       "models/x.yaml: head[0] (layer 2): Detect has nc 5 but the model has 2 classes (write 'nc' to take the "
       "model's)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1, 1], 1, Detect, [nc, anchors]]"),
       "models/x.yaml: head[0] (layer 2): Detect has 2 anchor levels but 3 inputs (from [0, 1, 1])"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 2, Detect, [nc, anchors]]"),
       "models/x.yaml: head[0] (layer 2): Detect cannot repeat (number 2): write it once"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Concat, [1]]"),
       "models/x.yaml: head[0] (layer 2): Concat inputs have 32×32 and 16×16 spatial sizes (layer 0 and layer 1)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Concat, [2]]"),
       "models/x.yaml: head[0] (layer 2): Concat arg 0 (dimension) must be 1 (channels: the only dimension "
       "supported), got 2"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Add, []]"),
       "models/x.yaml: head[0] (layer 2): Add inputs have shapes [8, 32, 32] and [16, 16, 16] (layer 0 and layer 1)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[[0, 1], 1, Conv, [8]]"),
       "models/x.yaml: head[0] (layer 2): Conv takes one input, from [0, 1] gives 2"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[-1, 1, Linear, [nc]]"),
       "models/x.yaml: head[0] (layer 2): Linear needs flat features, but layer 1 gives [16, 16, 16] (put Flatten "
       "or GlobalAvgPool before it)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[-1, 1, nn.Upsample, [None, 2, 'bilinear']]"),
       "models/x.yaml: head[0] (layer 2): Upsample arg 2 (mode) must be 'nearest' (the only mode supported), got "
       "'bilinear'"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [16, 11, 8, 0]]"),
       "models/x.yaml: backbone[1] (layer 1): input 9×9 is too small for Conv (11×11 window, stride 8, padding 0)",
       18},
      {tiny, "models/x.yaml: head[0] (layer 2): Detect input 1 (layer 1) is 13×13 for a 50×50 image: the image "
             "size must be a multiple of every level's stride", 50},
      {with("  - [[0, 1], 1, Detect, [nc, anchors]]", "  - [[0, 1], 1, Detect, [nc, anchors]]\n  - [-1, 1, ReLU, []]"),
       "models/x.yaml: head[0] (layer 2): Detect must be the last layer (its output is the model's)"},
      {with("backbone:", "ch: 1\nbackbone:"), "models/x.yaml: the file says ch 1 but the input has 3 channels"},
      {with("  - [-1, 1, Conv, [8, 3, 2]]", "  - [-1, 1, Conv, [8, 3, 2]"),
       "models/x.yaml: not valid YAML: "},  // yaml-cpp's own text follows
      {"", "models/x.yaml: expected a mapping with nc, depth_multiple, width_multiple, anchors, backbone, head"},
  };
  // Sizes out of range are refused while reading or before building, naming the entry: a huge count used to
  // build for minutes (or hang), a huge width_multiple ended in "got nothing".
  const std::string max_int = std::to_string(kMaxModelInt), max_rep = std::to_string(kMaxRepeats);
  const std::vector<Case> limits = {
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, " + std::to_string(kMaxRepeats + 1) + ", Conv, [16, 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): number " + std::to_string(kMaxRepeats + 1) +
           " is out of range (at most " + max_rep + " repeats) (line 6)"},
      {with("nc: 2\n", "nc: 2\nwidth_multiple: 1e30\n"),
       "models/x.yaml: width_multiple 1e+30 is out of range (0, " + std::to_string(int(kMaxMultiple)) + "] (line 3)"},
      {with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [" + std::to_string(kMaxModelInt + 1) + ", 3, 2]]"),
       "models/x.yaml: backbone[1] (layer 1): Conv arg 0 (c2) must be at most " + max_int +
           " (out of range for a model file), got " + std::to_string(kMaxModelInt + 1)},
      {with("nc: 2", "nc: " + std::to_string(kMaxModelInt + 1)),
       "models/x.yaml: nc " + std::to_string(kMaxModelInt + 1) + " is out of range (at most " + max_int + ") (line 2)"},
      {with("[[0, 1], 1, Detect, [nc, anchors]]", "[-1, 1, nn.Upsample, [None, " + max_int + ", 'nearest']]"),
       "models/x.yaml: head[0] (layer 2): output [16, " + std::to_string(16 * kMaxModelInt) + ", " +
           std::to_string(16 * kMaxModelInt) + "] holds " + values_text(16.0 * 16 * kMaxModelInt * 16 * kMaxModelInt) +
           " values per sample, more than hetrain handles (" + std::to_string(kMaxLayerValues) + ")"},
  };
  for (const Case& c : limits) EXPECT_EQ(error_of(c.text, c.hw), c.expected);
  // Repeats and channels after depth_multiple and width_multiple are bounded too.
  std::string deep = with("[-1, 1, Conv, [16, 3, 2]]", "[-1, " + max_rep + ", Conv, [16, 3, 1]]");
  deep.insert(deep.find("backbone:"), "depth_multiple: 2\n");
  EXPECT_EQ(error_of(deep), "models/x.yaml: backbone[1] (layer 1): number " + max_rep + " × depth_multiple 2 = " +
                                std::to_string(2 * kMaxRepeats) + " repeats, out of range (at most " + max_rep + ")");
  std::string wide = with("[-1, 1, Conv, [16, 3, 2]]", "[-1, 1, Conv, [" + std::to_string(kMaxChannels) + ", 3, 2]]");
  wide.insert(wide.find("backbone:"), "width_multiple: 2\n");
  EXPECT_EQ(error_of(wide), "models/x.yaml: backbone[1] (layer 1): " + std::to_string(kMaxChannels) +
                                " channels × width_multiple 2 = " + std::to_string(2 * kMaxChannels) +
                                " channels, out of range (at most " + std::to_string(kMaxChannels) + ")");
  for (const Case& c : cases) {
    const std::string got = error_of(c.text, c.hw);
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    if (c.expected.back() == ' ')
      EXPECT_EQ(got.substr(0, c.expected.size()), c.expected);
    else
      EXPECT_EQ(got, c.expected);
  }
  EXPECT_EQ(error_of(kTiny), "");  // the base case is fine
}
