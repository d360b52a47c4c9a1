// test/gpu/yolo_model_test.cpp — a YOLOv5-style graph model (models/ file format, docs/models.md) trained on
// the GPU against the same model on the CPU. With 80 classes each Detect convolution has 255 output
// channels, so its bias is 255 floats: the parameter buffer must still hand cuDNN and cuBLAS 256-byte
// aligned views (nn::ParamBuffer::kParamAlignment) and keep the padding between them zero on the device.
// Two training steps (forward, a fixed output gradient, backward, SGD with momentum and weight decay), then
// an evaluation forward. Tolerances as in model_test.cpp, and like it compared with what float arithmetic
// allows (gpu_test::expect_close_as_float_allows) where elementwise closeness is out of reach.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"

using namespace hetrain;
using gpu_test::expect_close_as_float_allows;

namespace {

// yolov5n's module kinds (Conv, C3 with and without shortcut, SPPF, Upsample, Concat, Detect) at a size
// that runs in a second on both devices; Detect on two levels (strides 4 and 8).
const char* kSmallYolo = R"(
nc: 80
depth_multiple: 0.33
width_multiple: 0.25
anchors:
  - [10,13, 16,30, 33,23]
  - [30,61, 62,45, 59,119]
backbone:
  - [-1, 1, Conv, [64, 6, 2, 2]]
  - [-1, 1, Conv, [128, 3, 2]]
  - [-1, 3, C3, [128]]
  - [-1, 1, Conv, [256, 3, 2]]
  - [-1, 1, SPPF, [256, 5]]
head:
  - [-1, 1, Conv, [128, 1, 1]]
  - [-1, 1, nn.Upsample, [None, 2, 'nearest']]
  - [[-1, 2], 1, Concat, [1]]
  - [-1, 1, C3, [128, False]]
  - [[8, 4], 1, Detect, [nc, anchors]]
)";

struct TempYaml {
  std::string path;
  explicit TempYaml(const char* text) {
    char tmpl[] = "/tmp/hetrain-yolo-test-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    path = std::string(tmpl) + ".yaml";  // the model loader goes by the extension
    std::rename(tmpl, path.c_str());
    std::ofstream(path) << text;
  }
  ~TempYaml() { std::remove(path.c_str()); }
};

std::vector<float> host_copy(const Tensor& t) {
  Tensor h = t.to(Device::CPU);
  return std::vector<float>(h.data(), h.data() + h.numel());
}

}  // namespace

TEST(CudaYoloModel, AlignedParametersTrainLikeTheCpu) {
  HT_REQUIRE_GPU();
  TempYaml file(kSmallYolo);
  nn::ModelConfig mc;
  mc.name = file.path, mc.in_channels = 3, mc.height = mc.width = 64, mc.num_classes = 80;
  // `nudged`: the CPU model fed the input moved by about one ulp (gpu_test::expect_close_as_float_allows).
  auto cpu_model = nn::Model::create(mc), gpu_model = nn::Model::create(mc), nudged = nn::Model::create(mc);
  cpu_model->init(5);
  gpu_model->init(5);
  nudged->init(5);
  gpu_model->to(Device::CUDA);
  const nn::ParamBuffer& pb = gpu_model->params();
  std::vector<char> is_param(size_t(pb.count()), 0);
  // The device addresses the layers hand to cuDNN and cuBLAS, values and gradients alike. (At FP32 both
  // libraries would also take 4-byte aligned views, so the training below could not tell; this can.)
  for (int i = 0; i < int(pb.specs().size()); ++i) {
    const nn::ParamSpec& s = pb.specs()[size_t(i)];
    ASSERT_EQ(reinterpret_cast<uintptr_t>(pb.param(i).data()) % 256, 0u) << s.name;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(pb.grad(i).data()) % 256, 0u) << s.name;
    for (int64_t j = 0; j < s.numel(); ++j) is_param[size_t(s.offset + j)] = 1;
  }
  ASSERT_NE(pb.find("model.9.m.0.bias"), -1);
  ASSERT_EQ(pb.specs()[size_t(pb.find("model.9.m.0.bias"))].numel(), 255);

  optim::SgdConfig sc;
  sc.momentum = 0.9f, sc.weight_decay = 5e-4f;
  optim::Sgd cpu_sgd(cpu_model->params(), sc), gpu_sgd(gpu_model->params(), sc), nudged_sgd(nudged->params(), sc);
  const int N = 2;
  auto x_host = gpu_test::random_floats(size_t(N) * 3 * 64 * 64, 21);
  Tensor x({N, 3, 64, 64});
  std::copy(x_host.begin(), x_host.end(), x.data());
  const Tensor x_gpu = x.to(Device::CUDA);
  Tensor x_nudged({N, 3, 64, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x_nudged.data()[i] = i % 2 ? std::nextafter(x.data()[i], INFINITY) : x.data()[i];

  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    cpu_model->params().grads().zero();
    gpu_model->params().grads().zero();
    nudged->params().grads().zero();
    const Tensor out_cpu = cpu_model->forward(x, true);
    const Tensor out_gpu = gpu_model->forward(x_gpu, true);
    const Tensor out_nudged = nudged->forward(x_nudged, true);
    ASSERT_EQ(out_gpu.shape(), out_cpu.shape());
    expect_close_as_float_allows("detect output", host_copy(out_gpu), host_copy(out_cpu), host_copy(out_nudged), 1e-4, 1e-3);
    Tensor dy(out_cpu.shape());
    const auto dy_host = gpu_test::random_floats(size_t(dy.numel()), 30 + step);
    std::copy(dy_host.begin(), dy_host.end(), dy.data());
    cpu_model->backward(dy);
    gpu_model->backward(dy.to(Device::CUDA));
    nudged->backward(dy);
    const std::vector<float> grads = host_copy(gpu_model->params().grads());
    expect_close_as_float_allows("gradients", grads, host_copy(cpu_model->params().grads()), host_copy(nudged->params().grads()), 1e-4, 1e-2);
    cpu_sgd.step(cpu_model->params(), 0.01f);
    gpu_sgd.step(gpu_model->params(), 0.01f);
    nudged_sgd.step(nudged->params(), 0.01f);
    const std::vector<float> values = host_copy(gpu_model->params().values());
    expect_close_as_float_allows("parameters after SGD", values, host_copy(cpu_model->params().values()), host_copy(nudged->params().values()),
          1e-5, 1e-3);
    for (size_t i = 0; i < values.size(); ++i) {
      if (is_param[i]) continue;
      ASSERT_TRUE(values[i] == 0.0f && grads[i] == 0.0f) << "padding float " << i;
    }
  }
  expect_close_as_float_allows("running statistics", host_copy(gpu_model->params().states()), host_copy(cpu_model->params().states()),
        host_copy(nudged->params().states()), 1e-5, 1e-3);
  expect_close_as_float_allows("eval output", host_copy(gpu_model->forward(x_gpu, false)), host_copy(cpu_model->forward(x, false)),
        host_copy(nudged->forward(x_nudged, false)), 1e-4, 1e-3);
}
