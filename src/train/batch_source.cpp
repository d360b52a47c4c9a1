#include "train/batch_source.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include "hetrain/error.hpp"

namespace hetrain::train {
namespace {

class DatasetSource : public BatchSource {
 public:
  DatasetSource(std::unique_ptr<data::Dataset> dataset, const SourceOptions& options)
      : dataset_(std::move(dataset)),
        prefetcher_(*dataset_, options.prefetch_depth, options.threads),
        augment_(options.augment) {}
  const data::DatasetInfo& info() const override { return dataset_->info(); }
  void submit(std::vector<int64_t> indices, bool augment, uint64_t aug_seed) override {
    prefetcher_.submit(std::move(indices), augment, augment_, aug_seed);
  }
  data::Batch next() override { return prefetcher_.next(); }

 private:
  std::unique_ptr<data::Dataset> dataset_;
  data::Prefetcher prefetcher_;
  data::AugmentConfig augment_;
};

// splitmix64: a tiny, well-mixed hash so each sample's bytes depend on (seed, index) alone.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(uint64_t& state) { return double((state = mix(state)) >> 11) * 0x1.0p-53; }

class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(int64_t n, int c, int h, int w, int classes, uint64_t seed, int64_t first_index,
                  const SourceOptions& options)
      : seed_(seed), first_(first_index), threads_(options.threads), augment_(options.augment) {
    HT_CHECK(n > 0, "--synthetic needs a positive sample count, got ", n);
    HT_CHECK(c > 0 && h > 0 && w > 0, "synthetic image shape must be positive, got ", c, "x", h, "x", w);
    HT_CHECK(classes >= 2, "synthetic data needs at least 2 classes, got ", classes);
    info_.path = "synthetic";
    info_.num_samples = n;
    info_.channels = c;
    info_.height = h;
    info_.width = w;
    info_.num_classes = classes;
    info_.mean.assign(c, 0.5f);
    info_.std.assign(c, 0.25f);
    info_.source = "synthetic (in memory)";
    // One smooth pattern per (class, channel): a plane wave with a class-specific direction and phase.
    for (int k = 0; k < classes; ++k)
      for (int ch = 0; ch < c; ++ch) {
        uint64_t s = mix(seed ^ mix(uint64_t(k) * 131 + ch));
        patterns_.push_back({1.0 + 3.0 * unit(s), 1.0 + 3.0 * unit(s), 6.2831853 * unit(s)});
      }
  }
  const data::DatasetInfo& info() const override { return info_; }

  void submit(std::vector<int64_t> indices, bool augment, uint64_t aug_seed) override {
    queue_.push_back({std::move(indices), augment, aug_seed});
  }

  data::Batch next() override {
    HT_CHECK(!queue_.empty(), "synthetic source: next() without a submitted batch");
    Request req = std::move(queue_.front());
    queue_.pop_front();
    const int64_t n = static_cast<int64_t>(req.indices.size()), bytes = info_.sample_bytes();
    std::vector<uint8_t> images(n * bytes);
    data::Batch batch;
    batch.labels.resize(n);
    for (int64_t i = 0; i < n; ++i) batch.labels[i] = render(req.indices[i], images.data() + i * bytes);
    batch.images = Tensor({n, info_.channels, info_.height, info_.width});
    data::augment_batch(images.data(), n, info_, req.augment, augment_, req.seed, batch.images.data(), threads_);
    batch.indices = std::move(req.indices);
    return batch;
  }

 private:
  struct Pattern { double fy, fx, phase; };
  struct Request { std::vector<int64_t> indices; bool augment; uint64_t seed; };

  int32_t render(int64_t index, uint8_t* out) const {
    HT_CHECK(index >= 0 && index < info_.num_samples, "synthetic sample ", index, " out of range");
    uint64_t s = mix(seed_ ^ mix(uint64_t(first_ + index)));
    const int label = static_cast<int>(mix(s) % uint64_t(info_.num_classes));
    const double contrast = 0.6 + 0.4 * unit(s);
    for (int ch = 0; ch < info_.channels; ++ch) {
      const Pattern& p = patterns_[label * info_.channels + ch];
      for (int y = 0; y < info_.height; ++y)
        for (int x = 0; x < info_.width; ++x) {
          double wave = std::sin(6.2831853 * (p.fy * y / info_.height + p.fx * x / info_.width) + p.phase);
          double v = 128.0 + 90.0 * contrast * wave + 60.0 * (unit(s) - 0.5);
          *out++ = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
    }
    return label;
  }

  data::DatasetInfo info_;
  uint64_t seed_;
  int64_t first_;
  int threads_;
  data::AugmentConfig augment_;
  std::vector<Pattern> patterns_;
  std::deque<Request> queue_;
};

}  // namespace

std::unique_ptr<BatchSource> open_dataset_source(const std::string& path, const SourceOptions& options) {
  return std::make_unique<DatasetSource>(data::Dataset::open(path), options);
}

std::unique_ptr<BatchSource> make_synthetic_source(int64_t num_samples, int channels, int height, int width,
                                                   int num_classes, uint64_t seed, int64_t first_index,
                                                   const SourceOptions& options) {
  return std::make_unique<SyntheticSource>(num_samples, channels, height, width, num_classes, seed, first_index,
                                           options);
}

}  // namespace hetrain::train
