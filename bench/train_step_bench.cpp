// bench/train_step_bench.cpp — training-step throughput of one model on random data (issue 2).
//
// One step = zero gradients, forward (training mode), softmax cross-entropy, backward, SGD with momentum:
// exactly the work of a single-rank training step without data loading or communication. Warm-up steps
// are untimed (first-touch allocation of activations and workspaces); then `steps` steps are timed.
// Run one configuration per process so that the peak resident memory (VmHWM) belongs to it alone.
//
//   bench_train_step --model resnet20 --size 32 --batch 128 --threads 1 --warmup 2 --steps 5 [--max-seconds S]
//                    [--device cpu|cuda] [--precision fp32|tf32|bf16|fp16 | --tf32 0|1] [--cpu-conv auto|im2col]
//                    [--profile 1]
//   bench_train_step --model models/yolov5s.yaml --size 320 --batch 8 --classes 10 ...   (a detector)
// A detector (a model file whose Detect head makes model->detect_head() non-null) has no logits: its step
// uses a fixed objective instead of a loss, exactly as bench/yolov5_torch.py does on the PyTorch side —
// the gradient of the head's rows [N, A, 5 + nc] is one fixed random tensor G (N(0, 1) / N, drawn once), so
// one step = zero gradients, forward, backward(G), SGD; the loss printed is sum(rows · G). The line then
// says model=<the file's stem> and ends with rows=AxNO objective=fixed-grad. `--show 1` prints the file's
// layer table (as `hetrain models --show`) for the given size and classes and exits, to set beside
// bench/yolov5_torch.py --show.
// Prints one line of key=value pairs that bench/run.sh (CPU) and scripts/gpu-check.sh (CUDA) collect. On
// the CPU it also has gflop_per_step (one step's FLOPs, counted from the convolution and dense-layer shapes
// of one more, profiled step: hetrain/op_profile.hpp) and gflops (that times the timed steps' rate);
// --profile 1 then prints "profile what=SHAPE calls= ms= share= gflops=" per layer shape, and the rest.
// --device cuda: the model on GPU 0 (cuDNN/cuBLAS/our kernels on the legacy default stream), the batch
// uploaded once, the loss through cuda::softmax_xent_*; the clock is read after cuda::device_synchronize()
// so the timed region holds finished GPU work. --precision is how the convolutions and dense layers multiply
// (hetrain/precision.hpp: fp32, tf32, or bf16/fp16 operands with FP32 accumulation; tensors stay float);
// --tf32 1 and --tf32 0 remain as the older spellings of tf32 and fp32. No loss scaling at fp16: one fixed
// batch, the throughput is what is measured. The line then also has device=cuda tf32=0|1 (1 at tf32 only),
// precision=fp32|tf32|bf16|fp16, dev_mem_mb (the drop in the GPU's free memory from before the model was moved
// to after the timed steps: parameters, optimizer state, activations, cuDNN workspaces, the 16-bit operands'
// scratch; not a true peak) and gpu=NAME (spaces as '_'), last.
// Without a GPU it prints one line "SKIP: no CUDA device: ..." and exits 3.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/op_profile.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/precision.hpp"
#include "hetrain/threading.hpp"

namespace {

struct Options {
  std::string model = "resnet20";
  int channels = 3, size = 32, classes = 10, batch = 128, threads = 1, warmup = 2, steps = 5;
  double max_seconds = 0;  // > 0: stop timing after the step that crosses this (at least one step)
  std::string device = "cpu";  // cpu | cuda
  hetrain::Precision precision = hetrain::Precision::FP32;  // cuda: how convolutions and dense layers multiply
  std::string cpu_conv = "auto";  // cpu: auto (oneDNN when built with it) or im2col (the twin, for comparison)
  int show = 0;                   // 1: print a model file's layer table and exit
  int profile = 0;                // cpu: 1 = after the timed steps, one profiled step's table per layer shape
};

constexpr int kExitSkip = 3;  // --device cuda without a usable GPU (scripts report a skip, not a failure)

// Peak resident set of this process in MiB (Linux: VmHWM in /proc/self/status), -1 if unknown.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // value is in kB
  return -1;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    HT_CHECK(i + 1 < argc, "bench_train_step: option ", key, " needs a value");
    const char* v = argv[++i];
    if (key == "--model") o.model = v;
    else if (key == "--channels") o.channels = std::atoi(v);
    else if (key == "--size") o.size = std::atoi(v);
    else if (key == "--classes") o.classes = std::atoi(v);
    else if (key == "--batch") o.batch = std::atoi(v);
    else if (key == "--threads") o.threads = std::atoi(v);
    else if (key == "--warmup") o.warmup = std::atoi(v);
    else if (key == "--steps") o.steps = std::atoi(v);
    else if (key == "--max-seconds") o.max_seconds = std::atof(v);
    else if (key == "--device") o.device = v;
    else if (key == "--precision") o.precision = hetrain::parse_precision(v, "bench_train_step: --precision");
    else if (key == "--tf32") {  // the older switch: 1 = tf32, 0 = fp32
      HT_CHECK(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0, "bench_train_step: --tf32 must be 0 or 1, got ",
               v);
      o.precision = std::strcmp(v, "1") == 0 ? hetrain::Precision::TF32 : hetrain::Precision::FP32;
    }
    else if (key == "--cpu-conv") o.cpu_conv = v;
    else if (key == "--show") o.show = std::atoi(v);
    else if (key == "--profile") o.profile = std::atoi(v);
    else HT_THROW("bench_train_step: unknown option ", key);
  }
  HT_CHECK(o.batch >= 1 && o.threads >= 1 && o.steps >= 1 && o.warmup >= 0, "bench_train_step: bad sizes");
  HT_CHECK(o.device == "cpu" || o.device == "cuda", "bench_train_step: --device must be cpu or cuda, got '",
           o.device, "'");
  HT_CHECK(o.cpu_conv == "auto" || o.cpu_conv == "im2col", "bench_train_step: --cpu-conv must be auto or im2col, got '",
           o.cpu_conv, "'");
  return o;
}

hetrain::nn::ModelConfig model_config(const Options& o) {
  hetrain::nn::ModelConfig mc;
  mc.name = o.model;
  mc.in_channels = o.channels;
  mc.height = mc.width = o.size;
  mc.num_classes = o.classes;
  return mc;
}

std::unique_ptr<hetrain::nn::Model> make_model(const Options& o) {
  auto model = hetrain::nn::Model::create(model_config(o));
  model->init(1);
  return model;
}

// Random inputs ~ N(0,1) [N, C, S, S] and uniform labels, fixed seed; the same batch every step (no data
// path here).
struct Batch {
  hetrain::Tensor x;
  std::vector<int32_t> labels;
};
Batch random_batch(const Options& o) {
  Batch b{hetrain::Tensor({o.batch, o.channels, o.size, o.size}), std::vector<int32_t>(size_t(o.batch))};
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < b.x.numel(); ++i) b.x[i] = normal(gen);
  for (auto& l : b.labels) l = int32_t(gen() % uint32_t(o.classes));
  return b;
}

// Untimed warm-up, then `steps` timed steps (fewer when max_seconds is crossed). `sync` runs before each
// clock reading (the GPU path waits for the device there). Returns {steps done, seconds}.
template <typename Step, typename Sync>
std::pair<int, double> time_steps(const Options& o, Step step, Sync sync) {
  for (int i = 0; i < o.warmup; ++i) step();
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int done = 0;
  while (done < o.steps) {
    step();
    ++done;
    if (o.max_seconds > 0 && elapsed() > o.max_seconds) break;  // keep a pathological case short
  }
  sync();
  return {done, elapsed()};
}

// ---------------------------------------------------------------- detectors: the fixed-gradient objective

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The name printed as model=: a model file's stem (models/yolov5s.yaml → yolov5s), a zoo name as given.
std::string model_label(const std::string& name) {
  if (!ends_with(name, ".yaml")) return name;
  const size_t slash = name.find_last_of('/');
  std::string stem = slash == std::string::npos ? name : name.substr(slash + 1);
  return stem.substr(0, stem.find_last_of('.'));
}

// The rows' shape [N, A, 5 + nc] of a detector's output, from its head layout.
hetrain::Shape detect_rows_shape(const hetrain::nn::DetectHeadLayout& h, int batch) {
  int64_t rows = 0;
  for (const int s : h.strides) rows += int64_t(h.anchors_per_level) * (h.image_h / s) * (h.image_w / s);
  return {batch, rows, h.num_classes + 5};
}

// The fixed gradient of the rows: N(0, 1) / batch, fixed seed, drawn once (bench/yolov5_torch.py's `g`).
hetrain::Tensor fixed_row_gradient(const hetrain::Shape& shape) {
  hetrain::Tensor g(shape);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scale = 1.0f / float(shape[0]);
  for (int64_t i = 0; i < g.numel(); ++i) g[i] = normal(gen) * scale;
  return g;
}

// sum(rows · g) of two host tensors of the same shape: the objective's value.
float dot(const hetrain::Tensor& rows, const hetrain::Tensor& g) {
  HT_CHECK(rows.shape() == g.shape(), "bench_train_step: the detector returned rows ", hetrain::shape_str(rows.shape()),
           ", expected ", hetrain::shape_str(g.shape()));
  double sum = 0;
  for (int64_t i = 0; i < g.numel(); ++i) sum += double(rows[i]) * double(g[i]);
  return float(sum);
}

std::string rows_suffix(const hetrain::Shape& shape) {
  return " rows=" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]) + " objective=fixed-grad";
}

int run_cpu(const Options& o) {
  hetrain::set_num_threads(o.threads);
  hetrain::ops::cpu::set_cpu_conv_backend(o.cpu_conv == "im2col" ? hetrain::ops::cpu::CpuConvBackend::Im2col
                                                             : hetrain::ops::cpu::CpuConvBackend::Auto);
  auto model = make_model(o);
  hetrain::optim::Sgd sgd(model->params(), hetrain::optim::SgdConfig{});
  const int N = o.batch, K = o.classes;
  Batch b = random_batch(o);
  const hetrain::nn::DetectHeadLayout* head = model->detect_head();
  hetrain::Tensor probs, dlogits, drows;
  std::string extra;
  if (head) {
    drows = fixed_row_gradient(detect_rows_shape(*head, N));
    extra = rows_suffix(drows.shape());
  } else {
    probs = hetrain::Tensor({N, K});
    dlogits = hetrain::Tensor({N, K});
  }

  float loss = 0;
  auto step = [&] {
    model->params().grads().zero();
    hetrain::Tensor logits = model->forward(b.x, /*training=*/true);
    if (head) {
      loss = dot(logits, drows);  // before backward: the rows live in the model's buffers
      model->backward(drows);
    } else {
      loss = hetrain::ops::cpu::softmax_xent_forward(probs.data(), logits.data(), b.labels.data(), N, K, 0.0f);
      hetrain::ops::cpu::softmax_xent_backward(dlogits.data(), probs.data(), b.labels.data(), N, K, 0.0f, 1.0f / N);
      model->backward(dlogits);
    }
    sgd.step(model->params(), 0.01f);
  };
  const auto [done, seconds] = time_steps(o, step, [] {});
  const float timed_loss = loss;  // the objective after the timed steps, as the CUDA line reports it
  // One more step with the op profile on: the FLOPs of a step, counted from the shapes the convolutions and
  // dense layers see (hetrain/op_profile.hpp), and where its time goes.
  hetrain::ops::op_profile_reset();
  hetrain::ops::set_op_profiling(true);
  const auto profiled_start = std::chrono::steady_clock::now();
  step();
  const double profiled_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - profiled_start).count();
  hetrain::ops::set_op_profiling(false);
  double flops = 0, op_seconds = 0;
  const std::vector<hetrain::ops::OpProfileRow> rows = hetrain::ops::op_profile();
  for (const auto& r : rows) flops += r.flops, op_seconds += r.seconds;

  std::printf("impl=hetrain model=%s size=%d batch=%d threads=%d steps=%d params=%lld seconds=%.4f "
              "samples_per_s=%.3f peak_mb=%.1f loss=%.4f conv=%s gflop_per_step=%.4f gflops=%.2f%s\n",
              model_label(o.model).c_str(), o.size, N, o.threads, done, (long long)model->param_count(), seconds,
              double(N) * done / seconds, peak_rss_mib(), timed_loss, hetrain::ops::cpu::cpu_conv_backend_name(),
              flops * 1e-9, flops * 1e-9 * done / seconds, extra.c_str());
  if (o.profile) {
    // what=… (spaces as '_') calls= ms= share= gflops=, then the step's remainder.
    for (const auto& r : rows) {
      std::string what = r.what;
      for (char& c : what)
        if (c == ' ') c = '_';
      std::printf("profile what=%s calls=%lld ms=%.2f share=%.4f gflops=%.2f\n", what.c_str(), (long long)r.calls,
                  r.seconds * 1e3, r.seconds / profiled_s, r.seconds > 0 ? r.flops * 1e-9 / r.seconds : 0.0);
    }
    std::printf("profile what=the_rest_(loss,_copies,_layer_bookkeeping) calls=1 ms=%.2f share=%.4f gflops=0\n",
                (profiled_s - op_seconds) * 1e3, (profiled_s - op_seconds) / profiled_s);
    std::printf("profile what=step calls=1 ms=%.2f share=1 gflops=%.2f\n", profiled_s * 1e3, flops * 1e-9 / profiled_s);
  }
  return 0;
}

void print_cuda_line(const Options& o, const hetrain::nn::Model& model, int done, double seconds, float loss,
                     const hetrain::CudaDeviceInfo& before, const std::string& extra) {
  const hetrain::CudaDeviceInfo after = hetrain::cuda_device_info(0);
  const double dev_mem_mb =
      before.free_bytes >= after.free_bytes ? double(before.free_bytes - after.free_bytes) / (1024.0 * 1024.0) : 0.0;
  std::string gpu = after.name;
  for (char& c : gpu)
    if (c == ' ' || c == '=') c = '_';  // one token, so key=value parsers read it whole
  std::printf("impl=hetrain model=%s size=%d batch=%d threads=%d steps=%d params=%lld seconds=%.4f "
              "samples_per_s=%.3f peak_mb=%.1f loss=%.4f device=cuda tf32=%d precision=%s dev_mem_mb=%.0f gpu=%s%s\n",
              model_label(o.model).c_str(), o.size, o.batch, o.threads, done, (long long)model.param_count(), seconds,
              double(o.batch) * done / seconds, peak_rss_mib(), loss, o.precision == hetrain::Precision::TF32 ? 1 : 0,
              hetrain::precision_name(o.precision), dev_mem_mb, gpu.c_str(), extra.c_str());
}

// A detector on GPU 0: the fixed gradient uploaded once; every step copies the rows to the host for the
// objective's value (the per-step synchronisation of the classifier path's loss copy).
int run_cuda_detector(const Options& o, hetrain::nn::Model& model, hetrain::optim::Sgd& sgd,
                      const hetrain::Tensor& x, const hetrain::CudaDeviceInfo& before) {
  using hetrain::Device;
  const hetrain::Tensor host_g = fixed_row_gradient(detect_rows_shape(*model.detect_head(), o.batch));
  const hetrain::Tensor g = host_g.to(Device::CUDA);
  const hetrain::Tensor host_rows(host_g.shape());
  float loss = 0;
  auto step = [&] {
    model.params().grads().zero();
    hetrain::Tensor rows = model.forward(x, /*training=*/true);
    host_rows.copy_from(rows);  // returns when done
    model.backward(g);
    sgd.step(model.params(), 0.01f);
    loss = dot(host_rows, host_g);
  };
  const auto [done, seconds] = time_steps(o, step, [] { hetrain::cuda::device_synchronize(); });
  print_cuda_line(o, model, done, seconds, loss, before, rows_suffix(host_g.shape()));
  return 0;
}

// The same step on GPU 0. Like pytorch_train_step.py's loss.item(), every step copies its loss to the host,
// so each step ends with the device idle (the same per-step synchronisation on both sides).
int run_cuda(const Options& o) {
  namespace cuda = hetrain::cuda;
  using hetrain::Device;
  if (hetrain::cuda_device_count() == 0) {
    std::printf("SKIP: %s\n", hetrain::cuda_status().c_str());  // "no CUDA device: ..." or "...built without CUDA"
    std::fflush(stdout);
    return kExitSkip;
  }
  hetrain::set_num_threads(o.threads);  // host-side work (initialisation) only
  const hetrain::CudaDeviceInfo before = hetrain::cuda_device_info(0);  // also makes GPU 0 current
  auto model = make_model(o);  // initialised on the host (same seed as the CPU path), then moved
  model->to(Device::CUDA, o.precision);
  hetrain::optim::Sgd sgd(model->params(), hetrain::optim::SgdConfig{});
  const int N = o.batch, K = o.classes;
  Batch host = random_batch(o);
  const hetrain::Tensor x = host.x.to(Device::CUDA);  // uploaded once
  const hetrain::nn::DetectHeadLayout* head = model->detect_head();
  if (head) return run_cuda_detector(o, *model, sgd, x, before);
  cuda::DeviceBuffer<int32_t> labels{size_t(N)};
  labels.upload(host.labels);
  // probs [N, K] becomes dlogits in place (softmax_xent_backward allows the alias); row_loss [N].
  const hetrain::Tensor probs({N, K}, Device::CUDA);
  cuda::DeviceBuffer<float> row_loss{size_t(N)};
  std::vector<float> row_loss_host(static_cast<size_t>(N));

  float loss = 0;
  auto step = [&] {
    model->params().grads().zero();
    hetrain::Tensor logits = model->forward(x, /*training=*/true);
    cuda::softmax_xent_forward(probs.data(), row_loss.data(), logits.data(), labels.data(), N, K, 0.0f, nullptr);
    cuda::softmax_xent_backward(probs.data(), probs.data(), labels.data(), N, K, 0.0f, 1.0f / N, nullptr);
    model->backward(probs);
    sgd.step(model->params(), 0.01f);
    cuda::copy_to_host(row_loss_host.data(), row_loss.data(), row_loss_host.size() * sizeof(float), nullptr);
    cuda::device_synchronize();
    double sum = 0;
    for (float v : row_loss_host) sum += v;
    loss = float(sum / N);
  };
  const auto [done, seconds] = time_steps(o, step, [] { hetrain::cuda::device_synchronize(); });

  print_cuda_line(o, *model, done, seconds, loss, before, "");
  return 0;
}

int run(const Options& o) {
  if (o.show) {
    std::printf("%s", hetrain::nn::describe_graph_model(o.model, model_config(o)).c_str());
    return 0;
  }
  return o.device == "cuda" ? run_cuda(o) : run_cpu(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: error: %s\n", e.what());
    return 1;
  }
}
