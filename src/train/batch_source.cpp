#include "train/batch_source.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "data/pack.hpp"
#include "hetrain/error.hpp"

namespace hetrain::train {
namespace {

class DatasetSource : public BatchSource {
 public:
  DatasetSource(std::unique_ptr<data::Dataset> dataset, const SourceOptions& options)
      : dataset_(std::move(dataset)),
        prefetcher_(*dataset_, options.prefetch_depth, options.threads, options.decode_threads),
        augment_(options.augment) {}
  const data::DatasetInfo& info() const override { return dataset_->info(); }
  void submit(std::vector<int64_t> indices, bool augment, uint64_t aug_seed, data::BatchForm form) override {
    prefetcher_.submit(std::move(indices), augment, augment_, aug_seed, form);
  }
  data::Batch next() override { return prefetcher_.next(); }
  void set_normalisation(std::vector<float> mean, std::vector<float> std) override {
    dataset_->set_normalisation(std::move(mean), std::move(std));
  }
  void set_augmentation(const data::AugmentConfig& augment) override { augment_ = augment; }
  void enable_node_cache(MPI_Comm node_comm) override { dataset_->enable_node_cache(node_comm); }

 private:
  std::unique_ptr<data::Dataset> dataset_;
  data::Prefetcher prefetcher_;
  data::AugmentConfig augment_;
};

// In-memory synthetic data: the same generator as `hetrain-pack synthetic`, rendered on request. A
// validation source with first_index = the training count holds samples the training never sees.
class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(int64_t n, int c, int h, int w, int classes, uint64_t seed, int64_t first_index,
                  const SourceOptions& options)
      : first_(first_index), threads_(options.threads), augment_(options.augment) {
    HT_CHECK(n > 0, "--synthetic needs a positive sample count, got ", n);
    HT_CHECK(classes >= 2, "--synthetic-classes must be at least 2, got ", classes);
    generator_ = data::open_synthetic(seed, first_index + n, c, h, w, classes);
    info_.path = "synthetic";
    info_.num_samples = n;
    info_.channels = c;
    info_.height = h;
    info_.width = w;
    info_.num_classes = classes;
    info_.source = "synthetic (in memory, seed " + std::to_string(seed) + ")";
    estimate_mean_std();
  }
  const data::DatasetInfo& info() const override { return info_; }
  void set_normalisation(std::vector<float> mean, std::vector<float> std) override {
    info_.mean = std::move(mean);
    info_.std = std::move(std);
  }
  void set_augmentation(const data::AugmentConfig& augment) override { augment_ = augment; }

  void submit(std::vector<int64_t> indices, bool augment, uint64_t aug_seed, data::BatchForm form) override {
    queue_.push_back({std::move(indices), augment, aug_seed, form});
  }

  data::Batch next() override {
    HT_CHECK(!queue_.empty(), "synthetic source: next() without a submitted batch");
    Request req = std::move(queue_.front());
    queue_.pop_front();
    const int64_t n = static_cast<int64_t>(req.indices.size()), bytes = info_.sample_bytes();
    std::vector<uint8_t> images(n * bytes);
    data::Batch batch;
    batch.labels.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      HT_CHECK(req.indices[i] >= 0 && req.indices[i] < info_.num_samples, "synthetic sample ", req.indices[i],
               " out of range");
      generator_->get(first_ + req.indices[i], images.data() + i * bytes, &batch.labels[i]);
    }
    if (req.augment && augment_.resized_crop) data::resized_crop_batch(images.data(), req.indices, info_, req.seed, threads_);
    if (req.form == data::BatchForm::Raw) {
      batch.raw = std::move(images);
      batch.crop_flip = data::draw_crop_flip(req.indices, req.augment, augment_, req.seed);
      batch.crop_pad = data::crop_pad(req.augment, augment_);
    } else {
      batch.images = Tensor({n, info_.channels, info_.height, info_.width});
      data::augment_batch(images.data(), req.indices, info_, req.augment, augment_, req.seed, batch.images.data(),
                          threads_);
    }
    batch.indices = std::move(req.indices);
    return batch;
  }

 private:
  struct Request {
    std::vector<int64_t> indices;
    bool augment;
    uint64_t seed;
    data::BatchForm form;
  };

  // Per-channel mean/std for normalisation, from the first samples (a packed file stores exact values).
  void estimate_mean_std() {
    const int64_t m = std::min<int64_t>(info_.num_samples, 256), plane = int64_t(info_.height) * info_.width;
    std::vector<uint8_t> image(info_.sample_bytes());
    std::vector<double> sum(info_.channels, 0.0), sq(info_.channels, 0.0);
    int32_t label = 0;
    for (int64_t i = 0; i < m; ++i) {
      generator_->get(first_ + i, image.data(), &label);
      for (int c = 0; c < info_.channels; ++c)
        for (int64_t p = 0; p < plane; ++p) {
          double v = image[c * plane + p] / 255.0;
          sum[c] += v;
          sq[c] += v * v;
        }
    }
    for (int c = 0; c < info_.channels; ++c) {
      double mean = sum[c] / double(m * plane);
      info_.mean.push_back(float(mean));
      info_.std.push_back(float(std::sqrt(std::max(sq[c] / double(m * plane) - mean * mean, 1e-6))));
    }
  }

  data::DatasetInfo info_;
  std::unique_ptr<data::SampleSource> generator_;
  int64_t first_;
  int threads_;
  data::AugmentConfig augment_;
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
