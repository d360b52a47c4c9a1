// core/device_memory.hpp — what core needs from a device layer to keep tensors in device memory.
//
// Core calls no device code by name, so the archives link in one direction, from the top of the
// architecture down (docs/architecture.md, "Device code"). Instead the device layer (src/cuda/memory.cpp)
// installs its functions here while the program starts; without one (a CPU-only build) a device tensor
// fails with "built without CUDA".
#pragma once

#include <cstddef>

namespace hetrain::core {

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

struct DeviceMemory {
  void* (*alloc)(size_t bytes);  // throws when the device is out of memory
  void (*free)(void* p) noexcept;
  void (*zero)(void* p, size_t bytes);                                     // enqueued on the default stream
  void (*copy)(void* dst, const void* src, size_t bytes, CopyKind kind);  // returns when the copy is done
};

// Called once by the device layer while the program starts; `memory` must live as long as the program.
void install_device_memory(const DeviceMemory* memory);
// The installed functions; throws "built without CUDA: rebuild with CUDA=1" when there are none.
const DeviceMemory& device_memory();

}  // namespace hetrain::core
