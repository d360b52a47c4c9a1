#include "train/device_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hetrain/error.hpp"

namespace hetrain::train {

// ---------------------------------------------------------------- input
DeviceInput::DeviceInput(const data::DatasetInfo& info) : info_(info) {
  HT_CHECK(info.channels <= cuda::kMaxImageChannels, "the GPU input path handles up to ", cuda::kMaxImageChannels,
           " channels, the data has ", info.channels);
  copy_stream_ = cuda::stream_create();
  copied_ = cuda::event_create();
}

DeviceInput::~DeviceInput() {
  if (copy_stream_) {
    try {
      cuda::stream_synchronize(copy_stream_);  // no copy may still read the pinned buffers
    } catch (const Error&) {
    }
  }
  cuda::event_destroy(copied_);
  cuda::stream_destroy(copy_stream_);
  cuda::host_pinned_free(pinned_images_);
  cuda::host_pinned_free(pinned_ints_);
}

void DeviceInput::reserve(int64_t n) {
  if (n <= capacity_) return;
  cuda::stream_synchronize(copy_stream_);
  cuda::host_pinned_free(pinned_images_);
  cuda::host_pinned_free(pinned_ints_);
  pinned_images_ = nullptr, pinned_ints_ = nullptr;
  const size_t sample = size_t(info_.sample_bytes());
  pinned_images_ = static_cast<uint8_t*>(cuda::host_pinned_alloc(size_t(n) * sample));
  pinned_ints_ = static_cast<int32_t*>(cuda::host_pinned_alloc(size_t(n) * 4 * sizeof(int32_t)));
  images_ = cuda::DeviceBuffer<uint8_t>(size_t(n) * sample);
  labels_ = cuda::DeviceBuffer<int32_t>(size_t(n));
  crop_flip_ = cuda::DeviceBuffer<int32_t>(size_t(n) * 3);
  capacity_ = n;
}

Tensor DeviceInput::upload(const data::Batch& batch) {
  const int64_t n = int64_t(batch.labels.size());
  const size_t sample = size_t(info_.sample_bytes());
  HT_CHECK(batch.raw.size() == size_t(n) * sample, "internal: a raw batch of ", n, " samples holds ",
           batch.raw.size(), " bytes, expected ", size_t(n) * sample);
  HT_CHECK(batch.crop_flip.size() == size_t(n) * 3, "internal: a raw batch of ", n, " samples has ",
           batch.crop_flip.size() / 3, " crop/flip entries");
  reserve(std::max<int64_t>(n, 1));
  // The previous upload's copies read the pinned buffers: they must be done before we overwrite them.
  cuda::stream_synchronize(copy_stream_);
  std::memcpy(pinned_images_, batch.raw.data(), batch.raw.size());
  std::memcpy(pinned_ints_, batch.labels.data(), size_t(n) * sizeof(int32_t));
  std::memcpy(pinned_ints_ + n, batch.crop_flip.data(), size_t(n) * 3 * sizeof(int32_t));
  // The device buffers are read by the previous step's normalisation on the compute stream, which has
  // finished: the trainer read that step's loss back before it asked for this batch.
  cuda::copy_to_device(images_.data(), pinned_images_, batch.raw.size(), copy_stream_);
  cuda::copy_to_device(labels_.data(), pinned_ints_, size_t(n) * sizeof(int32_t), copy_stream_);
  cuda::copy_to_device(crop_flip_.data(), pinned_ints_ + n, size_t(n) * 3 * sizeof(int32_t), copy_stream_);
  cuda::event_record(copied_, copy_stream_);
  cuda::stream_wait_event(nullptr, copied_);

  const Shape shape{n, info_.channels, info_.height, info_.width};
  if (!floats_.defined() || floats_.numel() < shape_numel(shape))
    floats_ = Tensor({std::max<int64_t>(capacity_, n) * info_.channels * info_.height * info_.width}, Device::CUDA);
  Tensor images = floats_.slice0(0, shape_numel(shape)).reshape(shape);
  if (n == 0) return images;
  cuda::ImageGeom g;
  g.N = int(n), g.C = info_.channels, g.H = info_.height, g.W = info_.width;
  g.out_h = info_.height, g.out_w = info_.width, g.pad = batch.crop_pad;
  for (int c = 0; c < info_.channels; ++c) g.mean[c] = info_.mean[c], g.std[c] = info_.std[c];
  cuda::normalize_crop_flip(images.data(), images_.data(), crop_flip_.data(), g, nullptr);
  return images;
}

// ---------------------------------------------------------------- loss
DeviceLoss::~DeviceLoss() {
  cuda::host_pinned_free(pinned_loss_);
  cuda::host_pinned_free(pinned_correct_);
}

Tensor DeviceLoss::compute(const Tensor& logits, const int32_t* device_labels, float label_smoothing,
                           bool want_gradient) {
  HT_CHECK(logits.device() == Device::CUDA && logits.ndim() == 2, "DeviceLoss: expected logits [n, K] on cuda");
  const int64_t n = logits.dim(0), K = logits.dim(1);
  if (n > capacity_) {
    cuda::stream_synchronize(nullptr);  // pending copies into the old pinned buffer
    cuda::host_pinned_free(pinned_loss_);
    pinned_loss_ = nullptr;
    pinned_loss_ = static_cast<float*>(cuda::host_pinned_alloc(size_t(n) * sizeof(float)));
    row_loss_ = cuda::DeviceBuffer<float>(size_t(n));
    capacity_ = n;
  }
  if (!pinned_correct_) {
    pinned_correct_ = static_cast<int64_t*>(cuda::host_pinned_alloc(sizeof(int64_t)));
    correct_ = cuda::DeviceBuffer<int64_t>(1);
  }
  rows_ = n;
  if (!probs_.defined() || probs_.shape() != logits.shape()) probs_ = Tensor(logits.shape(), Device::CUDA);
  cuda::softmax_xent_forward(probs_.data(), row_loss_.data(), logits.data(), device_labels, int(n), int(K),
                             label_smoothing, nullptr);
  cuda::memset_zero(correct_.data(), sizeof(int64_t));
  cuda::top1_correct(correct_.data(), logits.data(), device_labels, int(n), int(K), nullptr);
  cuda::copy_to_host(pinned_loss_, row_loss_.data(), size_t(n) * sizeof(float), nullptr);
  cuda::copy_to_host(pinned_correct_, correct_.data(), sizeof(int64_t), nullptr);
  if (!want_gradient) return Tensor();
  // The local loss is the mean over the n local samples; the b_r/B weight comes in the reduction.
  cuda::softmax_xent_backward(probs_.data(), probs_.data(), device_labels, int(n), int(K), label_smoothing,
                              1.0f / float(n), nullptr);
  return probs_;
}

void DeviceLoss::read(double* loss_sum, double* correct) {
  cuda::stream_synchronize(nullptr);
  double sum = 0;
  for (int64_t i = 0; i < rows_; ++i) sum += double(pinned_loss_[i]);  // NaN stays NaN: the caller checks
  *loss_sum = sum;
  *correct = double(*pinned_correct_);
}

int64_t count_nonfinite(const Tensor& t) {
  if (t.device() == Device::CUDA) {
    // One counter for the process: allocating (and freeing, which synchronises the device) every step
    // would cost more than the count.
    static cuda::DeviceBuffer<int64_t> count(1);
    cuda::memset_zero(count.data(), sizeof(int64_t));
    cuda::count_nonfinite(count.data(), t.data(), t.numel(), nullptr);
    return count.download()[0];
  }
  const float* x = t.data();
  const int64_t n = t.numel();
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(x[i]) ? 0 : 1;
  return bad;
}

}  // namespace hetrain::train
