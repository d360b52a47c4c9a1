// src/cuda/stubs/cuda_stubs.cpp — what a CPU-only build (CUDA=0) gets for hetrain/cuda.hpp.
//
// Device queries answer "no device"; everything else fails loudly, so a CPU build never silently pretends
// to run something on a GPU.
#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"

#define HT_NO_CUDA() HT_THROW("built without CUDA: rebuild with CUDA=1")

namespace hetrain {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_status() { return "no CUDA device: built without CUDA"; }
CudaDeviceInfo cuda_device_info(int) { HT_NO_CUDA(); }
int cuda_select_device(int) { HT_NO_CUDA(); }

struct StagedUpload::Impl {};
StagedUpload::StagedUpload() { HT_NO_CUDA(); }
StagedUpload::~StagedUpload() = default;
StagedUpload::Uploaded StagedUpload::upload(const std::vector<Part>&) { HT_NO_CUDA(); }

namespace cuda {

void* device_alloc(size_t) { HT_NO_CUDA(); }
void device_free(void*) noexcept {}
DeviceMemoryUse device_memory_use() { return {}; }  // nothing is allocated on a device without CUDA
void* host_pinned_alloc(size_t) { HT_NO_CUDA(); }
void host_pinned_free(void*) noexcept {}
void copy_to_device(void*, const void*, size_t, CudaStream) { HT_NO_CUDA(); }
void copy_to_host(void*, const void*, size_t, CudaStream) { HT_NO_CUDA(); }
void copy_device(void*, const void*, size_t, CudaStream) { HT_NO_CUDA(); }
void memset_zero(void*, size_t, CudaStream) { HT_NO_CUDA(); }
CudaStream stream_create() { HT_NO_CUDA(); }
void stream_destroy(CudaStream) noexcept {}
void stream_synchronize(CudaStream) { HT_NO_CUDA(); }
void set_wait_hook(std::function<void()>) {}  // nothing ever waits for a device without CUDA
CudaEvent event_create() { HT_NO_CUDA(); }
void event_destroy(CudaEvent) noexcept {}
void event_record(CudaEvent, CudaStream) { HT_NO_CUDA(); }
void stream_wait_event(CudaStream, CudaEvent) { HT_NO_CUDA(); }
void device_synchronize() { HT_NO_CUDA(); }

void softmax_xent_forward(float*, float*, const float*, const int32_t*, int, int, float, CudaStream) { HT_NO_CUDA(); }
void softmax_xent_backward(float*, const float*, const int32_t*, int, int, float, float, CudaStream) { HT_NO_CUDA(); }
void top1_correct(int64_t*, const float*, const int32_t*, int, int, CudaStream) { HT_NO_CUDA(); }
void add_forward(float*, const float*, const float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void accumulate(float*, const float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void scale(float*, float, int64_t, CudaStream) { HT_NO_CUDA(); }
void ema_update(float*, const float*, float, int64_t, CudaStream) { HT_NO_CUDA(); }
int64_t conv_algorithm_searches() { return 0; }  // true: nothing was searched
int64_t conv_algorithm_heuristic_choices() { return 0; }
void count_nonfinite(int64_t*, const float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void sgd_update(float*, float*, const float*, const float*, const float*, int64_t, const SgdStep&, CudaStream) {
  HT_NO_CUDA();
}
void normalize_crop_flip(float*, const uint8_t*, const int32_t*, const ImageGeom&, CudaStream) { HT_NO_CUDA(); }

NcclIdBytes nccl_unique_id() { HT_NO_CUDA(); }
struct NcclCommunicator::Impl {};
NcclCommunicator::NcclCommunicator(int, int, const NcclIdBytes&, double) { HT_NO_CUDA(); }
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { HT_NO_CUDA(); }
int NcclCommunicator::size() const { HT_NO_CUDA(); }
void NcclCommunicator::allreduce_sum(float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void NcclCommunicator::start_allreduce_sum(float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void NcclCommunicator::start_allreduce_sum_16bit(float*, int64_t, Precision, CudaStream) { HT_NO_CUDA(); }
void NcclCommunicator::wait_started() { HT_NO_CUDA(); }
CudaStream NcclCommunicator::stream() const { HT_NO_CUDA(); }

void cast_to_16bit(void*, const float*, int64_t, Precision, CudaStream) { HT_NO_CUDA(); }
void cast_from_16bit(float*, const void*, int64_t, Precision, CudaStream) { HT_NO_CUDA(); }
void accumulate_16bit(float*, const void*, int64_t, Precision, CudaStream) { HT_NO_CUDA(); }
size_t low_precision_scratch_bytes() { return 0; }  // true: no 16-bit layer ever ran

struct CudnnConv2d::Impl {};
CudnnConv2d::CudnnConv2d(const Conv2dGeom&, const CudnnConvOptions&) { HT_NO_CUDA(); }
CudnnConv2d::~CudnnConv2d() = default;
void CudnnConv2d::forward(float*, const float*, const float*, const float*, CudaStream) { HT_NO_CUDA(); }
void CudnnConv2d::backward(float*, float*, float*, const float*, const float*, const float*, CudaStream) {
  HT_NO_CUDA();
}
std::string CudnnConv2d::algorithms() const { HT_NO_CUDA(); }
size_t CudnnConv2d::workspace_bytes() const { HT_NO_CUDA(); }

void batchnorm_forward_train(float*, float*, float*, float*, float*, const float*, const float*, const float*, int, int,
                             int, float, float, CudaStream) {
  HT_NO_CUDA();
}
void batchnorm_forward_eval(float*, const float*, const float*, const float*, const float*, const float*, int, int, int,
                            float, CudaStream) {
  HT_NO_CUDA();
}
void batchnorm_backward(float*, float*, float*, const float*, const float*, const float*, const float*, const float*,
                        int, int, int, float, CudaStream) {
  HT_NO_CUDA();
}
void maxpool2d_forward(float*, const float*, const Pool2dGeom&, CudaStream) { HT_NO_CUDA(); }
void maxpool2d_backward(float*, const float*, const float*, const float*, const Pool2dGeom&, CudaStream) {
  HT_NO_CUDA();
}
void avgpool2d_forward(float*, const float*, const Pool2dGeom&, CudaStream) { HT_NO_CUDA(); }
void avgpool2d_backward(float*, const float*, const float*, const Pool2dGeom&, CudaStream) { HT_NO_CUDA(); }
void global_avgpool_forward(float*, const float*, int, int, int, CudaStream) { HT_NO_CUDA(); }
void global_avgpool_backward(float*, const float*, int, int, int, CudaStream) { HT_NO_CUDA(); }
void relu_forward(float*, const float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void relu_backward(float*, const float*, const float*, int64_t, CudaStream) { HT_NO_CUDA(); }
void linear_forward(float*, const float*, const float*, const float*, int, int, int, CudaStream, Precision) { HT_NO_CUDA(); }
void linear_backward(float*, float*, float*, const float*, const float*, const float*, int, int, int, CudaStream, Precision) {
  HT_NO_CUDA();
}

}  // namespace cuda
}  // namespace hetrain
