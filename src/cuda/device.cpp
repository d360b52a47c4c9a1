// src/cuda/device.cpp — device count, properties and per-rank selection (CUDA runtime API only).
#include <string>

#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain {
namespace {
// cudaGetDeviceCount without a usable GPU: 35 (no driver, as on the build machines), 100 (driver but no
// device), or another init error. Every failure means "no GPU" here; the reason is kept for messages.
int query_count(std::string* why) {
  int count = 0;  // left untouched on failure
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cuda::detail::take_last_cuda_error();  // clear it, so later checks do not report this one
    if (why) *why = std::string(cudaGetErrorName(rc)) + " (" + std::to_string(int(rc)) + "): " + cudaGetErrorString(rc);
    return 0;
  }
  if (why && count == 0) *why = "the driver reports 0 devices";
  return count;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the 16 bytes as nvidia-smi -L groups them.
std::string format_uuid(const cudaUUID_t& u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    const unsigned char b = static_cast<unsigned char>(u.bytes[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}
}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() { return query_count(nullptr); }

std::string cuda_status() {
  std::string why;
  int n = query_count(&why);
  if (n == 0) return "no CUDA device: " + why;
  return std::to_string(n) + (n == 1 ? " CUDA device" : " CUDA devices");
}

CudaDeviceInfo cuda_device_info(int index) {
  int count = cuda_device_count();
  HT_CHECK(index >= 0 && index < count, "CUDA device ", index, " does not exist (", cuda_status(), ")");
  cudaDeviceProp prop{};
  HT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  HT_CUDA_CHECK(cudaSetDevice(index));
  size_t free_b = 0, total_b = 0;
  HT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  CudaDeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.total_bytes = total_b;
  info.free_bytes = free_b;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.uuid = format_uuid(prop.uuid);
  return info;
}

int cuda_select_device(int local_rank) {
  HT_CHECK(local_rank >= 0, "local rank must be >= 0, got ", local_rank);
  int count = cuda_device_count();
  HT_CHECK(count > 0, "--device cuda asked for a GPU but there is none (", cuda_status(), ")");
  int dev = local_rank % count;
  HT_CUDA_CHECK(cudaSetDevice(dev));
  return dev;
}

}  // namespace hetrain
