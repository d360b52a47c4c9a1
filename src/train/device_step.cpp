#include "train/device_step.hpp"

#include <algorithm>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "ops/nonfinite/nonfinite.hpp"
#include "ops/normalize_crop_flip/normalize_crop_flip.hpp"

namespace hetrain::train {

// ---------------------------------------------------------------- input
DeviceInput::DeviceInput(const data::DatasetInfo& info) : info_(info) {
  HT_CHECK(info.channels <= kMaxImageChannels, "the GPU input path handles up to ", kMaxImageChannels,
           " channels, the data has ", info.channels);
  staging_ = std::make_unique<StagedUpload>();
}

DeviceInput::~DeviceInput() = default;

DeviceInput::Uploaded DeviceInput::upload(const data::Batch& batch) {
  const int64_t n = int64_t(batch.labels.size());
  const size_t sample = size_t(info_.sample_bytes());
  HT_CHECK(batch.raw.size() == size_t(n) * sample, "internal: a raw batch of ", n, " samples holds ",
           batch.raw.size(), " bytes, expected ", size_t(n) * sample);
  HT_CHECK(batch.crop_flip.size() == size_t(n) * 3, "internal: a raw batch of ", n, " samples has ",
           batch.crop_flip.size() / 3, " crop/flip entries");
  const StagedUpload::Uploaded copied = staging_->upload({{batch.raw.data(), batch.raw.size()},
                                                          {batch.labels.data(), size_t(n) * sizeof(int32_t)},
                                                          {batch.crop_flip.data(), size_t(n) * 3 * sizeof(int32_t)}});
  const auto* images = static_cast<const uint8_t*>(copied.parts[0]);
  const auto* crop_flip = static_cast<const int32_t*>(copied.parts[2]);

  const Shape shape{n, info_.channels, info_.height, info_.width};
  Tensor& floats = floats_[copied.slot];
  if (floats.numel() < shape_numel(shape)) floats = Tensor({std::max<int64_t>(shape_numel(shape), 1)}, Device::CUDA);
  Uploaded out;
  out.n = n;
  out.labels = static_cast<const int32_t*>(copied.parts[1]);
  out.boxes = batch.boxes;
  out.images = floats.slice0(0, shape_numel(shape)).reshape(shape);
  if (n == 0) return out;
  ImageGeom g;
  g.N = int(n), g.C = info_.channels, g.H = info_.height, g.W = info_.width;
  g.out_h = info_.height, g.out_w = info_.width, g.pad = batch.crop_pad;
  for (int c = 0; c < info_.channels; ++c) g.mean[c] = info_.mean[c], g.std[c] = info_.std[c];
  ops::normalize_crop_flip(out.images, images, crop_flip, g);
  return out;
}

int64_t count_nonfinite(const Tensor& t) { return ops::count_nonfinite(t); }

}  // namespace hetrain::train
