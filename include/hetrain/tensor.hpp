// hetrain/tensor.hpp — float32 tensors: shape, device tag, aligned owning storage, views.
//
// A Tensor is a cheap handle (shared storage + offset + shape). Owning tensors allocate 64-byte-aligned
// host memory, or device memory through the device layer (src/cuda/); views alias part of another tensor or of a raw
// buffer (the flat parameter buffer hands out views, one per parameter). Data is always contiguous,
// row-major (NCHW for images). The data of a CUDA tensor is a device pointer: only the ops of
// hetrain/cuda.hpp may touch it, and element access (operator[], fill) is for CPU tensors.
//
// Device work is ordered on CUDA's legacy default stream: allocation zero-fills there, and clone/copy_from
// copy there and wait, so host code that reads a copied tensor sees finished data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace hetrain {

enum class Device { CPU, CUDA };
const char* device_name(Device d);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[8, 3, 32, 32]"

// Aligned memory block, zero-filled; frees itself. CUDA storage comes from the device layer, which installs
// its allocator while the program starts (src/core/device_memory.hpp); a CPU-only build has none and throws
// "built without CUDA".
class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::CPU;
};

class Tensor {
 public:
  Tensor() = default;
  // Owning, zero-filled.
  explicit Tensor(Shape shape, Device device = Device::CPU);
  static Tensor zeros(Shape shape) { return Tensor(std::move(shape)); }
  // Non-owning view of memory that outlives the tensor (e.g. a slice of the flat parameter buffer).
  static Tensor view_of(float* data, Shape shape, Device device = Device::CPU);

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the back
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  Device device() const { return device_; }
  bool defined() const { return !shape_.empty(); }

  // Same memory, new shape (numel must match).
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension, sharing memory.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Deep copy on the same device.
  Tensor clone() const;
  // Deep copy on `device` (the same handle when it is already there).
  Tensor to(Device device) const;
  // Copies src's elements into this tensor (same numel, any pair of devices); returns when done.
  void copy_from(const Tensor& src) const;
  void fill(float v) const;  // CPU only
  void zero() const;         // any device
  float& operator[](int64_t i) const { return data_[i]; }
  // True when other tensors (views, copies) share this tensor's storage. Buffer pools reuse a tensor
  // once nobody else holds it.
  bool storage_shared() const { return storage_ && storage_.use_count() > 1; }

 private:
  std::shared_ptr<Storage> storage_;  // null for views of foreign memory
  float* data_ = nullptr;
  Shape shape_;
  int64_t numel_ = 0;
  Device device_ = Device::CPU;
};

}  // namespace hetrain
