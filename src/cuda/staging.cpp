// src/cuda/staging.cpp — StagedUpload (hetrain/cuda.hpp): pinned host slots, a copy stream and the events
// that order it against the default stream.
#include <algorithm>
#include <cstring>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"

namespace hetrain {

struct StagedUpload::Impl {
  struct Slot {
    std::vector<size_t> capacity;  // bytes of each part
    std::vector<void*> pinned;
    std::vector<cuda::DeviceBuffer<uint8_t>> device;
    CudaEvent released = nullptr;  // recorded on the default stream after its last use of this slot
    bool used = false, release_recorded = false;
  };
  Slot slots[2];
  int next = 0;
  CudaStream copy_stream = nullptr;
  CudaEvent copied = nullptr;

  void free_pinned(Slot& slot) {
    for (void* p : slot.pinned) cuda::host_pinned_free(p);
    slot.pinned.clear(), slot.capacity.clear(), slot.device.clear();
  }
  void reserve(Slot& slot, const std::vector<Part>& parts);
};

StagedUpload::StagedUpload() : impl_(std::make_unique<Impl>()) {
  impl_->copy_stream = cuda::stream_create();
  impl_->copied = cuda::event_create();
  for (Impl::Slot& slot : impl_->slots) slot.released = cuda::event_create();
}

StagedUpload::~StagedUpload() {
  try {
    cuda::stream_synchronize(impl_->copy_stream);  // no copy may still read the pinned buffers
  } catch (const Error&) {
  }
  cuda::event_destroy(impl_->copied);
  cuda::stream_destroy(impl_->copy_stream);
  for (Impl::Slot& slot : impl_->slots) {
    cuda::event_destroy(slot.released);
    impl_->free_pinned(slot);
  }
}

// Grows a slot to hold every part (at least one byte each, so that every address is a real one).
void StagedUpload::Impl::reserve(Slot& slot, const std::vector<Part>& parts) {
  bool fits = slot.capacity.size() == parts.size();
  for (size_t i = 0; fits && i < parts.size(); ++i) fits = parts[i].bytes <= slot.capacity[i];
  if (fits) return;
  cuda::stream_synchronize(copy_stream);
  cuda::device_synchronize();  // the old device buffers may still be read by the default stream
  free_pinned(slot);
  for (const Part& part : parts) {
    const size_t bytes = std::max<size_t>(part.bytes, 1);
    slot.pinned.push_back(cuda::host_pinned_alloc(bytes));
    slot.device.emplace_back(bytes);
    slot.capacity.push_back(bytes);
  }
}

StagedUpload::Uploaded StagedUpload::upload(const std::vector<Part>& parts) {
  Impl& m = *impl_;
  // The other slot was filled by the previous upload; by this contract every use of it on the default
  // stream is enqueued by now. Mark that point, so that the copy into it one upload from now waits for
  // exactly that work and not for the step enqueued after it.
  Impl::Slot& previous = m.slots[m.next ^ 1];
  if (previous.used) {
    cuda::event_record(previous.released, nullptr);
    previous.release_recorded = true;
  }
  Uploaded out;
  out.slot = m.next;
  Impl::Slot& slot = m.slots[m.next];
  m.next ^= 1;
  m.reserve(slot, parts);
  // The host side: the copy stream's earlier copies out of the pinned memory must have finished before it
  // is overwritten (the previous copy, from the other slot, is usually still running: one short wait).
  cuda::stream_synchronize(m.copy_stream);
  for (size_t i = 0; i < parts.size(); ++i) std::memcpy(slot.pinned[i], parts[i].data, parts[i].bytes);
  // The device side: the default stream may still be reading this slot (the previous step's input and
  // loss). Nothing orders the copy stream after that work but this wait.
  if (slot.release_recorded) cuda::stream_wait_event(m.copy_stream, slot.released);
  for (size_t i = 0; i < parts.size(); ++i) {
    cuda::copy_to_device(slot.device[i].data(), slot.pinned[i], parts[i].bytes, m.copy_stream);
    out.parts.push_back(slot.device[i].data());
  }
  cuda::event_record(m.copied, m.copy_stream);
  cuda::stream_wait_event(nullptr, m.copied);  // the default stream's next work waits for the copy
  slot.used = true;
  return out;
}

}  // namespace hetrain
