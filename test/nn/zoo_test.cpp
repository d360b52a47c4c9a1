// Parameter counts against torchvision / the reference ResNet-20, torchvision names, input validation.
#include <gtest/gtest.h>

#include <string>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;
using test::shape_of;

namespace {
ModelConfig cfg(const std::string& name, int c, int hw, int classes) {
  ModelConfig m;
  m.name = name, m.in_channels = c, m.height = hw, m.width = hw, m.num_classes = classes;
  return m;
}
std::string error_of(const ModelConfig& c) {
  try {
    Model::create(c);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}
}  // namespace

TEST(Zoo, ParameterCountsMatchReferences) {
  // torchvision: sum(p.numel() for p in resnet18().parameters()) etc.
  EXPECT_EQ(Model::create(cfg("resnet18", 3, 224, 1000))->param_count(), 11689512);
  EXPECT_EQ(Model::create(cfg("resnet50", 3, 224, 1000))->param_count(), 25557032);
  // ResNet-20 (He et al.) with 1×1 conv + BN projections at the two stage changes.
  EXPECT_EQ(Model::create(cfg("resnet20", 3, 32, 10))->param_count(), 272474);
  // mlp 1×28×28: 784·256+256 + 256·128+128 + 128·10+10
  EXPECT_EQ(Model::create(cfg("mlp", 1, 28, 10))->param_count(), 784 * 256 + 256 + 256 * 128 + 128 + 1290);
  // lenet 1×28×28: 28 →conv(pad 2) 28 →pool 14 →conv 10 →pool 5, so fc1 takes 16·5·5
  EXPECT_EQ(Model::create(cfg("lenet", 1, 28, 10))->param_count(),
            (6 * 25 + 6) + (16 * 6 * 25 + 16) + (16 * 5 * 5 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10));
}

TEST(Zoo, NonDefaultChannelsAndClasses) {
  // Only conv1 and fc change: resnet18 with 1 input channel, 10 classes.
  const int64_t r18 = 11689512 - 64 * 3 * 49 + 64 * 1 * 49 - (512 * 1000 + 1000) + (512 * 10 + 10);
  EXPECT_EQ(Model::create(cfg("resnet18", 1, 64, 10))->param_count(), r18);
  const int64_t r20 = 272474 - 16 * 3 * 9 + 16 * 5 * 9 - (64 * 10 + 10) + (64 * 100 + 100);
  EXPECT_EQ(Model::create(cfg("resnet20", 5, 16, 100))->param_count(), r20);
  // lenet on 3×32×32: 32 →pool 16 →conv 12 →pool 6, so fc1 takes 16·6·6
  EXPECT_EQ(Model::create(cfg("lenet", 3, 32, 7))->param_count(),
            (6 * 75 + 6) + (16 * 6 * 25 + 16) + (16 * 6 * 6 * 120 + 120) + (120 * 84 + 84) + (84 * 7 + 7));
}

TEST(Zoo, TorchvisionNamesResnet18) {
  auto m = Model::create(cfg("resnet18", 3, 224, 1000));
  const ParamBuffer& pb = m->params();
  EXPECT_EQ(pb.specs().size(), 62u);        // len(list(resnet18().parameters()))
  EXPECT_EQ(pb.state_specs().size(), 40u);  // running_mean/var of 20 BN layers
  EXPECT_EQ(pb.specs().front().name, "conv1.weight");
  EXPECT_EQ(pb.specs().back().name, "fc.bias");
  EXPECT_EQ(shape_of(pb, "conv1.weight"), (Shape{64, 3, 7, 7}));
  EXPECT_EQ(shape_of(pb, "bn1.weight"), (Shape{64}));
  EXPECT_EQ(shape_of(pb, "bn1.bias"), (Shape{64}));
  EXPECT_EQ(shape_of(pb, "layer1.0.conv1.weight"), (Shape{64, 64, 3, 3}));
  EXPECT_EQ(shape_of(pb, "layer2.0.conv1.weight"), (Shape{128, 64, 3, 3}));
  EXPECT_EQ(shape_of(pb, "layer2.0.downsample.0.weight"), (Shape{128, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "layer2.0.downsample.1.weight"), (Shape{128}));
  EXPECT_EQ(shape_of(pb, "layer4.1.bn2.bias"), (Shape{512}));
  EXPECT_EQ(shape_of(pb, "fc.weight"), (Shape{1000, 512}));
  EXPECT_EQ(pb.find("layer1.0.downsample.0.weight"), -1);  // identity shortcut there
  EXPECT_GE(pb.find_state("bn1.running_mean"), 0);
  EXPECT_GE(pb.find_state("bn1.running_var"), 0);
  EXPECT_GE(pb.find_state("layer3.0.downsample.1.running_var"), 0);
  // torchvision's declaration order inside a block: conv1, bn1, conv2, bn2, downsample
  const int c2 = pb.find("layer2.0.conv2.weight"), ds = pb.find("layer2.0.downsample.0.weight");
  EXPECT_EQ(pb.find("layer2.0.bn2.bias") + 1, ds);
  EXPECT_LT(c2, ds);
}

TEST(Zoo, TorchvisionNamesResnet50) {
  auto m = Model::create(cfg("resnet50", 3, 224, 1000));
  const ParamBuffer& pb = m->params();
  EXPECT_EQ(pb.specs().size(), 161u);
  EXPECT_EQ(pb.state_specs().size(), 106u);
  EXPECT_EQ(shape_of(pb, "layer1.0.conv1.weight"), (Shape{64, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "layer1.0.conv3.weight"), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "layer1.0.downsample.0.weight"), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(shape_of(pb, "layer2.0.conv2.weight"), (Shape{128, 128, 3, 3}));
  EXPECT_EQ(shape_of(pb, "layer3.5.bn3.weight"), (Shape{1024}));
  EXPECT_EQ(shape_of(pb, "layer4.2.bn3.weight"), (Shape{2048}));
  EXPECT_EQ(shape_of(pb, "fc.weight"), (Shape{1000, 2048}));
  EXPECT_EQ(pb.find("layer1.1.downsample.0.weight"), -1);
  EXPECT_GE(pb.find_state("layer4.2.bn3.running_mean"), 0);
}

TEST(Zoo, ForwardShapes) {
  for (const char* name : {"mlp", "lenet", "resnet20", "resnet18", "resnet50"}) {
    const int hw = std::string(name).rfind("resnet", 0) == 0 && std::string(name) != "resnet20" ? 32 : 16;
    auto m = Model::create(cfg(name, 2, hw, 5));
    m->init(1);
    Tensor x({2, 2, hw, hw});
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = float(i % 7) * 0.1f;
    Tensor y = m->forward(x, true);
    EXPECT_EQ(y.shape(), (Shape{2, 5})) << name;
    EXPECT_EQ(m->has_batch_coupling(), std::string(name).rfind("resnet", 0) == 0) << name;
  }
}

TEST(Zoo, ClearErrors) {
  std::string e = error_of(cfg("resnet18", 3, 16, 10));
  EXPECT_NE(e.find("resnet18"), std::string::npos) << e;
  EXPECT_NE(e.find("32"), std::string::npos) << e;
  EXPECT_NE(e.find("16"), std::string::npos) << e;
  e = error_of(cfg("lenet", 1, 11, 10));
  EXPECT_NE(e.find("lenet"), std::string::npos) << e;
  EXPECT_NE(e.find("12"), std::string::npos) << e;
  EXPECT_TRUE(error_of(cfg("resnet50", 3, 32, 10)).empty());
  EXPECT_TRUE(error_of(cfg("lenet", 1, 12, 10)).empty());
  e = error_of(cfg("vgg16", 3, 32, 10));
  EXPECT_NE(e.find("vgg16"), std::string::npos) << e;
  EXPECT_NE(e.find("resnet20"), std::string::npos) << e;  // lists the known names
  EXPECT_FALSE(error_of(cfg("resnet20", 0, 32, 10)).empty());
  EXPECT_FALSE(error_of(cfg("resnet20", 3, 32, 0)).empty());

  auto m = Model::create(cfg("resnet20", 3, 8, 10));
  m->init(0);
  EXPECT_THROW(m->forward(Tensor({2, 3, 16, 16}), true), Error);  // not the configured size
  EXPECT_THROW(m->forward(Tensor({2, 1, 8, 8}), true), Error);
  EXPECT_EQ(Model::names().size(), 5u);
}

// The per-sample activation footprint drives the GPU memory caps: it must be positive, grow with the
// image area, and leave the model as it was.
TEST(Zoo, ActivationFootprintScalesWithImageAreaAndLeavesTheModelAlone) {
  auto small = Model::create(cfg("resnet20", 3, 16, 10)), big = Model::create(cfg("resnet20", 3, 32, 10));
  small->init(1);
  big->init(1);
  const Tensor states_before = big->params().states().clone();
  const int64_t s = small->activation_bytes_per_sample(), b = big->activation_bytes_per_sample();
  EXPECT_GT(s, 0);
  // Activations are 4× larger at 4× the pixels (the parameter-sized buffers do not depend on the batch).
  EXPECT_GT(double(b) / double(s), 3.5);
  EXPECT_LT(double(b) / double(s), 4.5);
  // resnet20 at 32×32 keeps at least its 19 conv outputs of 16-64 channels per sample: > 200 KB.
  EXPECT_GT(b, 200 * 1024);
  for (int64_t i = 0; i < big->params().state_count(); ++i)
    ASSERT_EQ(big->params().states()[i], states_before[i]) << "running statistic " << i << " changed";
  for (int64_t i = 0; i < big->params().count(); ++i) ASSERT_EQ(big->params().grads()[i], 0.0f) << i;
  auto mlp = Model::create(cfg("mlp", 1, 4, 5));
  mlp->init(1);
  EXPECT_GT(mlp->activation_bytes_per_sample(), 0);  // dense layers pool their buffers too
}
