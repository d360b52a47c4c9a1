// The GPU side of a training step: a batch's bytes to the device, and the loss computed there.
//
// A GPU rank asks its batch source for raw batches (uint8 images plus the crops and flips drawn on the
// host from the data seed, data::BatchForm::Raw): uint8 moves 4× fewer bytes than floats, and the
// conversion, crop and flip run as one kernel (cuda::normalize_crop_flip) instead of on a host thread.
// Everything here works on the legacy default stream, like the model's layers, except the copy itself.
#pragma once

#include <cstdint>

#include "hetrain/cuda.hpp"
#include "hetrain/data.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::train {

// Two slots, used in turn, so the trainer can upload step k+1's batch while step k still computes: the
// copy runs on a copy stream next to the compute stream, into the slot step k does not use.
class DeviceInput {
 public:
  struct Uploaded {
    Tensor images;                    // float [n, C, H, W] on the device
    const int32_t* labels = nullptr;  // [n] on the device
    int64_t n = 0;
    data::BoxList boxes;  // detection datasets: the batch's boxes, on the host (the loss runs there)
  };
  explicit DeviceInput(const data::DatasetInfo& info);
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;
  // Copies the raw batch into the next slot's pinned memory and from there to the device on the copy
  // stream (asynchronous); the normalisation kernel, enqueued on the compute stream, waits for the copy.
  // The result stays valid until the upload after next (the other slot is then in use), with one limit:
  // the labels only for compute-stream work enqueued before the NEXT upload() call. That call marks the end
  // of this slot's use on the compute stream (an event), and the copy into this slot one upload later waits
  // for that mark, not for the step running in between, so the copy still overlaps it.
  Uploaded upload(const data::Batch& batch);

 private:
  struct Slot {
    int64_t capacity = 0;  // samples
    uint8_t* pinned_images = nullptr;
    int32_t* pinned_ints = nullptr;  // labels, then crop_flip
    cuda::DeviceBuffer<uint8_t> images;
    cuda::DeviceBuffer<int32_t> labels, crop_flip;
    Tensor floats;
    CudaEvent released = nullptr;  // recorded on the compute stream after its last use of this slot
    bool release_recorded = false;
  };
  void reserve(Slot& slot, int64_t n);
  data::DatasetInfo info_;
  Slot slots_[2];
  int next_slot_ = 0;
  CudaStream copy_stream_ = nullptr;
  CudaEvent copied_ = nullptr;
};

// Softmax cross-entropy and top-1 on the device for one step. compute() enqueues the kernels and the
// copies of the per-row losses and the correct count into pinned memory; read() waits for them.
class DeviceLoss {
 public:
  DeviceLoss() = default;
  ~DeviceLoss();
  DeviceLoss(const DeviceLoss&) = delete;
  DeviceLoss& operator=(const DeviceLoss&) = delete;
  // logits [n, K] on the device → dlogits [n, K] of the MEAN loss over the n rows, times `loss_scale`
  // (valid until the next compute()). Without `want_gradient` (evaluation) only the loss and the count are
  // computed.
  Tensor compute(const Tensor& logits, const int32_t* device_labels, float label_smoothing, bool want_gradient,
                 float loss_scale = 1.0f);
  // Σ row losses and the number of correct rows of the last compute(); waits for the device.
  void read(double* loss_sum, double* correct);

 private:
  Tensor probs_;                           // [n, K]; holds dlogits after the backward kernel
  cuda::DeviceBuffer<float> row_loss_;     // [capacity]
  cuda::DeviceBuffer<int64_t> correct_;    // [1]
  float* pinned_loss_ = nullptr;           // [capacity]
  int64_t* pinned_correct_ = nullptr;      // [1]
  int64_t capacity_ = 0, rows_ = 0;
};

// NaN and ±Inf elements of t, on either device (cuda::count_nonfinite on the GPU). Waits for the result.
int64_t count_nonfinite(const Tensor& t);

}  // namespace hetrain::train
