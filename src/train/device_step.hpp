// The GPU side of a training step: a batch's bytes to the device.
//
// A GPU rank asks its batch source for raw batches (uint8 images plus the crops and flips drawn on the
// host from the data seed, data::BatchForm::Raw): uint8 moves 4× fewer bytes than floats, and the
// conversion, crop and flip run on the device as one op (ops/normalize_crop_flip) instead of on a host
// thread. The streams, events and pinned memory are the device layer's (StagedUpload, hetrain/cuda.hpp);
// the loss is the softmax_xent op on every device (train/local_step.cpp). Everything here works on the
// legacy default stream, like the model's layers, except the copy itself.
#pragma once

#include <cstdint>
#include <memory>

#include "hetrain/data.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain {
class StagedUpload;
}

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
  // the labels only for compute-stream work enqueued before the NEXT upload() call (StagedUpload::upload).
  Uploaded upload(const data::Batch& batch);

 private:
  data::DatasetInfo info_;
  std::unique_ptr<StagedUpload> staging_;
  Tensor floats_[2];  // the normalised images of each slot
};

// NaN and ±Inf elements of t, on either device (ops/nonfinite). Waits for the result.
int64_t count_nonfinite(const Tensor& t);

}  // namespace hetrain::train
