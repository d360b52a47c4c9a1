// bench/checkpoint_bench.cpp — what a checkpoint costs: write and load time and file size for one model.
//
// Writes the model's checkpoint (parameters, BN statistics, momentum: docs/checkpoint-format.md) to DIR
// `--repeat` times through the trainer's own path (in-memory HDF5 image, write, fsync, rename, folder
// fsync), then loads and verifies it (attributes, tensors, CRC-32) as many times. Prints one key=value
// line; bench/run.sh puts a `dd` of the same number of bytes (with fsync) beside it.
//
//   bench_checkpoint --model resnet50 --size 224 --classes 1000 --dir /tmp/x --repeat 3
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "train/checkpoint.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string model = "resnet50", dir = ".";
  int size = 224, classes = 1000, channels = 3, repeat = 3;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string key = argv[i];
      HT_CHECK(i + 1 < argc, "bench_checkpoint: option ", key, " needs a value");
      const char* v = argv[++i];
      if (key == "--model") model = v;
      else if (key == "--size") size = std::atoi(v);
      else if (key == "--classes") classes = std::atoi(v);
      else if (key == "--channels") channels = std::atoi(v);
      else if (key == "--dir") dir = v;
      else if (key == "--repeat") repeat = std::max(1, std::atoi(v));
      else HT_THROW("bench_checkpoint: unknown option ", key);
    }
    hetrain::nn::ModelConfig mc;
    mc.name = model;
    mc.in_channels = channels;
    mc.height = mc.width = size;
    mc.num_classes = classes;
    auto m = hetrain::nn::Model::create(mc);
    m->init(1);
    const auto& p = m->params();
    hetrain::train::CheckpointTensors t;
    t.values.assign(p.values().data(), p.values().data() + p.count());
    t.states.assign(p.states().data(), p.states().data() + p.state_count());
    t.momentum = t.values;  // any numbers of the right size
    t.num_batches_tracked = 1000;
    hetrain::train::CheckpointInfo info;
    info.model = model;
    info.input_shape = {channels, size, size};
    info.num_classes = classes;
    info.global_step = 1000;
    info.steps_per_epoch = info.global_batch = info.num_samples = 1000;
    info.world_size = 1;
    info.config_text = "model=" + model + "\n";
    info.split = {256};
    info.alpha = info.beta = {0.0};

    const std::string path = hetrain::train::checkpoint_path(dir, info.global_step);
    double write_best = 1e30, load_best = 1e30;
    for (int r = 0; r < repeat; ++r) {
      auto start = Clock::now();
      hetrain::train::write_checkpoint(path, info, p, t);
      write_best = std::min(write_best, since(start));
    }
    for (int r = 0; r < repeat; ++r) {
      auto start = Clock::now();
      (void)hetrain::train::read_checkpoint_info(path);
      auto loaded = hetrain::train::read_checkpoint_tensors(path, p);
      load_best = std::min(load_best, since(start));
      HT_CHECK(loaded.values == t.values, "bench_checkpoint: the loaded parameters differ from the written ones");
    }
    struct stat st {};
    HT_CHECK(::stat(path.c_str(), &st) == 0, "bench_checkpoint: ", path, " is gone");
    const double tensor_mb = double(2 * p.count() + p.state_count()) * 4 / 1e6;
    std::printf("model=%s params=%lld file_bytes=%lld tensor_mb=%.1f write_s=%.4f load_s=%.4f\n", model.c_str(),
                (long long)p.count(), (long long)st.st_size, tensor_mb, write_best, load_best);
    std::remove(path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
