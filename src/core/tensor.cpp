#include "hetrain/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/device_memory.hpp"
#include "hetrain/error.hpp"

namespace hetrain {

namespace core {
namespace {
// Constant-initialised, so it is null before any installation runs, whatever the order of static
// initialisation between the archives.
const DeviceMemory* installed_device_memory = nullptr;
}  // namespace

void install_device_memory(const DeviceMemory* memory) { installed_device_memory = memory; }

const DeviceMemory& device_memory() {
  if (!installed_device_memory) HT_THROW("built without CUDA: rebuild with CUDA=1");
  return *installed_device_memory;
}
}  // namespace core

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    HT_CHECK(d >= 0, "negative dimension in shape ", shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (device == Device::CUDA) {
    const core::DeviceMemory& memory = core::device_memory();
    data_ = memory.alloc(std::max<size_t>(bytes, 64));
    memory.zero(data_, std::max<size_t>(bytes, 64));
    return;
  }
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  data_ = std::aligned_alloc(64, rounded);
  HT_CHECK(data_ != nullptr, "out of host memory allocating ", bytes, " bytes");
  std::memset(data_, 0, rounded);
}

Storage::~Storage() {
  if (device_ == Device::CUDA)
    core::device_memory().free(data_);
  else
    std::free(data_);
}

Tensor::Tensor(Shape shape, Device device) : shape_(std::move(shape)), device_(device) {
  numel_ = shape_numel(shape_);
  storage_ = std::make_shared<Storage>(static_cast<size_t>(numel_) * sizeof(float), device);
  data_ = static_cast<float*>(storage_->data());
}

Tensor Tensor::view_of(float* data, Shape shape, Device device) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.data_ = data;
  t.device_ = device;
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? n + i : i;
  HT_CHECK(j >= 0 && j < n, "dimension ", i, " out of range for shape ", shape_str(shape_));
  return shape_[j];
}

Tensor Tensor::reshape(Shape shape) const {
  HT_CHECK(shape_numel(shape) == numel_, "cannot reshape ", shape_str(shape_), " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  HT_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "slice [", begin, ", ", end,
           ") out of range for shape ", shape_str(shape_));
  int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.numel_ = row * (end - begin);
  t.data_ = data_ + begin * row;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t(shape_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  HT_CHECK(src.numel_ == numel_, "copy_from: ", shape_str(src.shape_), " into ", shape_str(shape_),
           " (element counts differ)");
  const size_t bytes = size_t(numel_) * sizeof(float);
  if (bytes == 0 || src.data_ == data_) return;
  if (device_ == Device::CPU && src.device_ == Device::CPU) {
    std::memcpy(data_, src.data_, bytes);
    return;
  }
  const core::CopyKind kind = device_ == Device::CPU  ? core::CopyKind::DeviceToHost
                              : src.device_ == Device::CPU ? core::CopyKind::HostToDevice
                                                           : core::CopyKind::DeviceToDevice;
  core::device_memory().copy(data_, src.data_, bytes, kind);
}

void Tensor::fill(float v) const {
  HT_CHECK(device_ == Device::CPU, "fill(", v, ") on a ", device_name(device_), " tensor (CPU only)");
  for (int64_t i = 0; i < numel_; ++i) data_[i] = v;
}

void Tensor::zero() const {
  if (device_ == Device::CUDA)
    core::device_memory().zero(data_, size_t(numel_) * sizeof(float));
  else
    std::memset(data_, 0, size_t(numel_) * sizeof(float));
}

}  // namespace hetrain
