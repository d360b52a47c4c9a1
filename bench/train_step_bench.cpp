// bench/train_step_bench.cpp — training-step throughput of one model on random data (issue 2).
//
// One step = zero gradients, forward (training mode), softmax cross-entropy, backward, SGD with momentum:
// exactly the work of a single-rank training step without data loading or communication. Warm-up steps
// are untimed (first-touch allocation of activations and workspaces); then `steps` steps are timed.
// Run one configuration per process so that the peak resident memory (VmHWM) belongs to it alone.
//
//   bench_train_step --model resnet20 --size 32 --batch 128 --threads 1 --warmup 2 --steps 5 [--max-seconds S]
// Prints one line of key=value pairs that bench/run.sh collects into its table.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/threading.hpp"

namespace {

struct Options {
  std::string model = "resnet20";
  int channels = 3, size = 32, classes = 10, batch = 128, threads = 1, warmup = 2, steps = 5;
  double max_seconds = 0;  // > 0: stop timing after the step that crosses this (at least one step)
};

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
    else HT_THROW("bench_train_step: unknown option ", key);
  }
  HT_CHECK(o.batch >= 1 && o.threads >= 1 && o.steps >= 1 && o.warmup >= 0, "bench_train_step: bad sizes");
  return o;
}

int run(const Options& o) {
  hetrain::set_num_threads(o.threads);
  hetrain::nn::ModelConfig mc;
  mc.name = o.model;
  mc.in_channels = o.channels;
  mc.height = mc.width = o.size;
  mc.num_classes = o.classes;
  auto model = hetrain::nn::Model::create(mc);
  model->init(1);
  hetrain::optim::Sgd sgd(model->params(), hetrain::optim::SgdConfig{});

  // Random inputs ~ N(0,1) and uniform labels, fixed seed; the same batch every step (no data path here).
  const int N = o.batch, K = o.classes;
  hetrain::Tensor x({N, o.channels, o.size, o.size});
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = normal(gen);
  std::vector<int32_t> labels(N);
  for (auto& l : labels) l = int32_t(gen() % uint32_t(K));
  hetrain::Tensor probs({N, K}), dlogits({N, K});

  float loss = 0;
  auto step = [&] {
    model->params().grads().zero();
    hetrain::Tensor logits = model->forward(x, /*training=*/true);
    loss = hetrain::cpu::softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K, 0.0f);
    hetrain::cpu::softmax_xent_backward(dlogits.data(), probs.data(), labels.data(), N, K, 0.0f, 1.0f / N);
    model->backward(dlogits);
    sgd.step(model->params(), 0.01f);
  };
  for (int i = 0; i < o.warmup; ++i) step();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int done = 0;
  while (done < o.steps) {
    step();
    ++done;
    if (o.max_seconds > 0 && elapsed() > o.max_seconds) break;  // keep a pathological case short
  }
  const double seconds = elapsed();

  std::printf("impl=hetrain model=%s size=%d batch=%d threads=%d steps=%d params=%lld seconds=%.4f "
              "samples_per_s=%.3f peak_mb=%.1f loss=%.4f\n",
              o.model.c_str(), o.size, N, o.threads, done, (long long)model->param_count(), seconds,
              double(N) * done / seconds, peak_rss_mib(), loss);
  return 0;
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
