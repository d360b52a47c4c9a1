// Where the trainer's local batches come from: an HDF5 dataset through the prefetcher, or in-memory
// synthetic samples (`hetrain train --synthetic N`). Both hand back batches in the order their requests were
// submitted, so the loop can queue requests a few steps ahead: normalised floats (data::BatchForm::Float), or
// uint8 plus the crops/flips to apply on the device (data::BatchForm::Raw, GPU ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/data.hpp"

namespace hetrain::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual const data::DatasetInfo& info() const = 0;
  // Queue the samples of one local batch (may be empty: a rank with b_r = 0 still steps).
  // The default argument lives here only: callers go through BatchSource.
  virtual void submit(std::vector<int64_t> indices, bool augment, uint64_t aug_seed,
                      data::BatchForm form = data::BatchForm::Float) = 0;
  virtual data::Batch next() = 0;
  // Replaces info()'s mean and std, what batches are normalised by (data::Dataset::set_normalisation).
  // Before the first submit().
  virtual void set_normalisation(std::vector<float> mean, std::vector<float> std) = 0;
  // Replaces how batches submitted with augment = true are augmented (SourceOptions::augment). Before the
  // first submit().
  virtual void set_augmentation(const data::AugmentConfig& augment) = 0;
  // Collective over node_comm: keep the data in memory once per node. A no-op for in-memory sources.
  virtual void enable_node_cache(MPI_Comm node_comm) {}
};

struct SourceOptions {
  int prefetch_depth = 2;
  int threads = 1;
  int decode_threads = 0;  // JPEG datasets: threads that decode a batch (0 = threads)
  data::AugmentConfig augment;
};

std::unique_ptr<BatchSource> open_dataset_source(const std::string& path, const SourceOptions& options);

// Seeded images with learnable class structure, generated on request: sample i of a source depends only on
// (seed, first_index + i), so a "validation" source with another first_index holds different samples.
std::unique_ptr<BatchSource> make_synthetic_source(int64_t num_samples, int channels, int height, int width,
                                                   int num_classes, uint64_t seed, int64_t first_index,
                                                   const SourceOptions& options);

}  // namespace hetrain::train
