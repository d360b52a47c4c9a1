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
  for (Slot& slot : slots_) slot.released = cuda::event_create();
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
  for (Slot& slot : slots_) {
    cuda::event_destroy(slot.released);
    cuda::host_pinned_free(slot.pinned_images);
    cuda::host_pinned_free(slot.pinned_ints);
  }
}

void DeviceInput::reserve(Slot& slot, int64_t n) {
  if (n <= slot.capacity) return;
  cuda::stream_synchronize(copy_stream_);
  cuda::device_synchronize();  // the old device buffers may still be read by the compute stream
  cuda::host_pinned_free(slot.pinned_images);
  cuda::host_pinned_free(slot.pinned_ints);
  slot.pinned_images = nullptr, slot.pinned_ints = nullptr, slot.capacity = 0;  // consistent if allocation throws
  const size_t sample = size_t(info_.sample_bytes());
  slot.pinned_images = static_cast<uint8_t*>(cuda::host_pinned_alloc(size_t(n) * sample));
  slot.pinned_ints = static_cast<int32_t*>(cuda::host_pinned_alloc(size_t(n) * 4 * sizeof(int32_t)));
  slot.images = cuda::DeviceBuffer<uint8_t>(size_t(n) * sample);
  slot.labels = cuda::DeviceBuffer<int32_t>(size_t(n));
  slot.crop_flip = cuda::DeviceBuffer<int32_t>(size_t(n) * 3);
  slot.floats = Tensor({n * info_.channels * info_.height * info_.width}, Device::CUDA);
  slot.capacity = n;
}

DeviceInput::Uploaded DeviceInput::upload(const data::Batch& batch) {
  const int64_t n = int64_t(batch.labels.size());
  const size_t sample = size_t(info_.sample_bytes());
  HT_CHECK(batch.raw.size() == size_t(n) * sample, "internal: a raw batch of ", n, " samples holds ",
           batch.raw.size(), " bytes, expected ", size_t(n) * sample);
  HT_CHECK(batch.crop_flip.size() == size_t(n) * 3, "internal: a raw batch of ", n, " samples has ",
           batch.crop_flip.size() / 3, " crop/flip entries");
  // The other slot was filled by the previous upload; by this contract (device_step.hpp) every use of it on
  // the compute stream is enqueued by now. Mark that point, so that the copy into it one upload from now
  // waits for exactly that work and not for the step enqueued after it.
  Slot& previous = slots_[next_slot_ ^ 1];
  if (previous.capacity > 0) {
    cuda::event_record(previous.released, nullptr);
    previous.release_recorded = true;
  }
  Slot& slot = slots_[next_slot_];
  next_slot_ ^= 1;
  reserve(slot, std::max<int64_t>(n, 1));
  // The host side: the copy stream's earlier copies out of the pinned memory must have finished before it
  // is overwritten (the previous copy, from the other slot, is usually still running: one short wait).
  cuda::stream_synchronize(copy_stream_);
  std::memcpy(slot.pinned_images, batch.raw.data(), batch.raw.size());
  std::memcpy(slot.pinned_ints, batch.labels.data(), size_t(n) * sizeof(int32_t));
  std::memcpy(slot.pinned_ints + n, batch.crop_flip.data(), size_t(n) * 3 * sizeof(int32_t));
  // The device side: the compute stream may still be reading this slot's images, crop/flip (the previous
  // normalisation) and labels (the loss of the step that used them). Nothing orders the copy stream after
  // that work but this wait; a loss read-back in between used to make it safe by accident.
  if (slot.release_recorded) cuda::stream_wait_event(copy_stream_, slot.released);
  cuda::copy_to_device(slot.images.data(), slot.pinned_images, batch.raw.size(), copy_stream_);
  cuda::copy_to_device(slot.labels.data(), slot.pinned_ints, size_t(n) * sizeof(int32_t), copy_stream_);
  cuda::copy_to_device(slot.crop_flip.data(), slot.pinned_ints + n, size_t(n) * 3 * sizeof(int32_t), copy_stream_);
  cuda::event_record(copied_, copy_stream_);
  cuda::stream_wait_event(nullptr, copied_);  // the compute stream's next work waits for the copy

  Uploaded out;
  out.n = n;
  out.labels = slot.labels.data();
  out.boxes = batch.boxes;
  const Shape shape{n, info_.channels, info_.height, info_.width};
  out.images = slot.floats.slice0(0, shape_numel(shape)).reshape(shape);
  if (n == 0) return out;
  cuda::ImageGeom g;
  g.N = int(n), g.C = info_.channels, g.H = info_.height, g.W = info_.width;
  g.out_h = info_.height, g.out_w = info_.width, g.pad = batch.crop_pad;
  for (int c = 0; c < info_.channels; ++c) g.mean[c] = info_.mean[c], g.std[c] = info_.std[c];
  cuda::normalize_crop_flip(out.images.data(), slot.images.data(), slot.crop_flip.data(), g, nullptr);
  return out;
}

// ---------------------------------------------------------------- loss
DeviceLoss::~DeviceLoss() {
  cuda::host_pinned_free(pinned_loss_);
  cuda::host_pinned_free(pinned_correct_);
}

Tensor DeviceLoss::compute(const Tensor& logits, const int32_t* device_labels, float label_smoothing,
                           bool want_gradient, float loss_scale) {
  HT_CHECK(logits.device() == Device::CUDA && logits.ndim() == 2, "DeviceLoss: expected logits [n, K] on cuda");
  const int64_t n = logits.dim(0), K = logits.dim(1);
  if (n > capacity_) {
    cuda::stream_synchronize(nullptr);  // pending copies into the old pinned buffer
    cuda::host_pinned_free(pinned_loss_);
    pinned_loss_ = nullptr, capacity_ = 0;  // consistent even if the allocation below throws
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
                              loss_scale / float(n), nullptr);
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
