// hetrain/cuda.hpp — the device layer (src/cuda/): device queries, device memory, streams and events, staged
// uploads, NCCL, and the vendor-library ops (cuDNN convolution, batch norm, pooling; cuBLAS dense layers); and
// the stream-taking launchers of the ops' own kernels (kernels/<op>.cu), for code that runs them on a stream
// of its own (docs/architecture.md, "Ops").
//
// The same text in every build configuration, and no CUDA header behind it: a CPU-only build links stubs
// (src/cuda/stubs/) that report 0 devices and throw "built without CUDA: rebuild with CUDA=1" from every
// other function. Streams are CUstream_st* (the type cudaStream_t names), forward-declared here; nullptr
// is the legacy default stream.
//
// Kernel launchers (namespace hetrain::cuda) follow the CPU ops of hetrain/ops.hpp: raw DEVICE pointers,
// outputs first, shapes in comments. They check their arguments on the host, enqueue on the given stream
// and return without waiting; launch errors throw hetrain::Error.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/geometry.hpp"
#include "hetrain/precision.hpp"

struct CUstream_st;
struct CUevent_st;

namespace hetrain {

using CudaStream = CUstream_st*;
using CudaEvent = CUevent_st*;

// ---------------------------------------------------------------- device queries
bool cuda_built();         // true when this binary was built with CUDA=1
int cuda_device_count();   // 0 when no GPU or no driver answers (never throws for that)
// One line for notices and skip messages: "2 CUDA devices", "no CUDA device: cudaErrorInsufficientDriver (35)
// ...", "built without CUDA".
std::string cuda_status();
struct CudaDeviceInfo {
  int index = -1;
  std::string name;
  size_t total_bytes = 0, free_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  std::string uuid;  // "GPU-8e3c...", as nvidia-smi -L prints it: the same GPU in every process
};
CudaDeviceInfo cuda_device_info(int index);  // makes `index` the current device of this thread
// Each rank takes GPU local_rank % count; throws when there is no GPU. Returns the device index. Under
// Slurm's per-task GPU binding each rank sees only its own GPU (count 1) and takes that one; on a node
// with fewer GPUs than ranks two ranks land on one GPU, which gpu_sharing_error() below refuses.
int cuda_select_device(int local_rank);

// ---------------------------------------------------------------- one rank per GPU (src/cuda/common/)
// What a rank reports about its device so that the job can check that no two ranks of a node use the same
// GPU: NCCL refuses that ("Duplicate GPU detected"), and two ranks sharing a GPU would each size their
// memory cap from the same free memory. Compared by UUID, not by index: with per-task binding every rank
// calls its GPU 0. Pure functions, in every build configuration.
struct GpuClaim {
  std::string host;    // the node
  int local_rank = 0;  // rank among the processes on that node
  int visible = 0;     // GPUs this rank sees (cuda_device_count())
  std::string gpu;     // the UUID of the GPU it trains on; "" for a CPU rank (never in conflict)
};
std::string gpu_claim_text(const GpuClaim& c);            // one line without newlines, for an allgather
GpuClaim parse_gpu_claim(const std::string& text);         // its inverse; throws on malformed text
// "" when no GPU is claimed twice. Otherwise one line about the first GPU claimed twice (in the order given):
// its node, the node's GPU count and GPU ranks, the two local ranks that collide, and what to do.
std::string gpu_sharing_error(const std::vector<GpuClaim>& ranks);

// ---------------------------------------------------------------- staged uploads (src/cuda/staging.cpp)
// Host data to the current device in the background, for code that must not handle streams itself (the
// trainer's input, src/train/device_step.cpp): two slots used in turn, so the next step's batch is copied on
// a copy stream while this step computes on the legacy default stream, where the model's layers run.
class StagedUpload {
 public:
  struct Part {
    const void* data = nullptr;
    size_t bytes = 0;
  };
  struct Uploaded {
    int slot = 0;               // 0 or 1, in turn
    std::vector<void*> parts;   // each part's device copy, in the order given
  };
  StagedUpload();
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;
  // Copies the parts into the next slot's pinned memory, and from there to its device memory on the copy
  // stream (asynchronous); the default stream's next work waits for that copy. The device copies stay valid
  // until the upload after next, with one limit: default-stream work may read them only if it is enqueued
  // before the NEXT upload() call. That call marks the end of this slot's use on the default stream (an
  // event), and the copy into this slot one upload later waits for that mark, not for the step running in
  // between, so the copy still overlaps it. Throws "built without CUDA" in a CPU-only build.
  Uploaded upload(const std::vector<Part>& parts);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace cuda {

// ---------------------------------------------------------------- memory and streams
void* device_alloc(size_t bytes);          // cudaMalloc; throws with the size and free memory on failure
void device_free(void* p) noexcept;        // null is fine; errors are ignored (safe in destructors)
// The bytes device_alloc has handed out and not yet taken back (tensors, the activation pool, workspaces,
// scratch; not the CUDA context or the libraries' own buffers), now and at their highest so far. A CPU-only
// build allocates none: zeros.
struct DeviceMemoryUse {
  int64_t in_use_bytes = 0, peak_bytes = 0;
};
DeviceMemoryUse device_memory_use();
void* host_pinned_alloc(size_t bytes);     // page-locked host memory, for asynchronous copies
void host_pinned_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, size_t bytes, CudaStream stream = nullptr);  // async
void copy_to_host(void* dst, const void* src, size_t bytes, CudaStream stream = nullptr);    // async
void copy_device(void* dst, const void* src, size_t bytes, CudaStream stream = nullptr);     // async
void memset_zero(void* p, size_t bytes, CudaStream stream = nullptr);
CudaStream stream_create();  // non-blocking stream
void stream_destroy(CudaStream s) noexcept;
// Waits for the stream's work. While a wait hook is set on the calling thread, it polls the stream and runs
// the hook between polls (not re-entered), instead of blocking in the runtime.
void stream_synchronize(CudaStream s);
// Work for the calling thread while stream_synchronize waits, for instance the elastic modes' MPI progress
// (train/shared_step.hpp, DeviceWaitHook), so a GPU rank serves 16-bit center trades while its step's last
// work runs. Only this thread runs it; an empty function removes it. A CPU-only build never waits: no-op.
void set_wait_hook(std::function<void()> hook);
void device_synchronize();
// Ordering between streams: `wait` runs what is enqueued on it after `e`'s recorded point has run.
CudaEvent event_create();  // without timing
void event_destroy(CudaEvent e) noexcept;
void event_record(CudaEvent e, CudaStream stream);
void stream_wait_event(CudaStream wait, CudaEvent e);

// Owning device array of n elements of T (uninitialised). Move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n), p_(static_cast<T*>(device_alloc(n * sizeof(T)))) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(o.n_), p_(o.p_) { o.n_ = 0, o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { device_free(p_); n_ = o.n_, p_ = o.p_, o.n_ = 0, o.p_ = nullptr; }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { device_free(p_); }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  // Synchronous helpers for tests and set-up (stream 0, then wait).
  void upload(const std::vector<T>& host) {
    copy_to_device(p_, host.data(), std::min(host.size(), n_) * sizeof(T));
    device_synchronize();
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    copy_to_host(host.data(), p_, n_ * sizeof(T));
    device_synchronize();
    return host;
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

// ---------------------------------------------------------------- loss and metrics (kernels/softmax_xent.cu)
// One block per row. probs [N, K]; row_loss [N] = -Σ_k target_k·log p_k with target = (1-ε)·onehot + ε/K
// (the mean over rows is ops::cpu::softmax_xent_forward's return value). A label outside [0, K) gives a NaN loss
// for that row (kernels cannot throw; the NaN check catches it).
void softmax_xent_forward(float* probs, float* row_loss, const float* logits, const int32_t* labels, int N, int K,
                          float label_smoothing, CudaStream stream);
// dlogits [N, K] = (probs - target)·scale; dlogits may alias probs.
void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* labels, int N, int K,
                           float label_smoothing, float scale, CudaStream stream);
// *count += number of rows of logits [N, K] whose first arg-max equals the label. count: one device int64.
void top1_correct(int64_t* count, const float* logits, const int32_t* labels, int N, int K, CudaStream stream);

// ---------------------------------------------------------------- elementwise (kernels/add.cu, scale.cu, nonfinite.cu)
// out [n] = a + b (residual add); out may alias a or b.
void add_forward(float* out, const float* a, const float* b, int64_t n, CudaStream stream);
// acc [n] += x (merging gradient paths)
void accumulate(float* acc, const float* x, int64_t n, CudaStream stream);
// x [n] *= a (the b_r/B weight of a rank's gradient before the sum over ranks)
void scale(float* x, float a, int64_t n, CudaStream stream);
// avg [n] ← decay·avg + (1 − decay)·x, each product and the sum rounded on its own (kernels/ema.cu)
void ema_update(float* avg, const float* x, float decay, int64_t n, CudaStream stream);
// *count += number of NaN/±Inf elements of x [n]. count: one device int64 (zero it first).
void count_nonfinite(int64_t* count, const float* x, int64_t n, CudaStream stream);

// ---------------------------------------------------------------- optimizer (kernels/sgd.cu)
// PyTorch's SGD fused with the gradient scale, element i:
//   g = grad_scale·grad[i] + weight_decay·(decay_mask ? decay_mask[i] : 1)·param[i]
//   v = momentum·v + g;  step = nesterov ? g + momentum·v : v;  param[i] -= lr·step
// With momentum == 0 the step is g and velocity is not touched (may be null). decay_mask [n] holds factors
// (usually 0 or 1: no decay on BN parameters and biases); null decays every element.
struct SgdStep {
  float lr = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;  // e.g. b_r/B when the local gradient is a mean over b_r samples
  float group_lr = 0.0f;    // the rate of the elements lr_group marks
};
// lr_group [n] (null: none) marks with a non-zero value the elements stepped at group_lr instead of lr.
void sgd_update(float* param, float* velocity, const float* grad, const float* decay_mask, const float* lr_group,
                int64_t n, const SgdStep& step, CudaStream stream);

// ---------------------------------------------------------------- input pipeline (kernels/normalize_crop_flip.cu)
// uint8 images in [N, C, H, W] → float out [N, C, out_h, out_w]:
//   out[n,c,y,x] = (in[n,c,y0+y-pad, x0+x'-pad] / 255 - mean[c]) / std[c],  x' = flip ? out_w-1-x : x
// where (y0, x0, flip) = crop_flip[n, 0..2] index the zero-padded image (0 ≤ y0 ≤ H+2·pad-out_h). Pixels in
// the padding read as 0 before normalisation (torchvision's RandomCrop(padding) + Normalize). The offsets
// and flags are drawn on the host from the data seed, so CPU and GPU ranks augment identically.
// crop_flip == null: no crop and no flip (requires out_h == H, out_w == W, pad == 0), for evaluation.
// ImageGeom: hetrain/geometry.hpp.
void normalize_crop_flip(float* out, const uint8_t* in, const int32_t* crop_flip /*[N, 3] or null*/,
                         const ImageGeom& g, CudaStream stream);

// ---------------------------------------------------------------- NCCL (src/cuda/nccl_communicator.cpp)
// The unique id travels as bytes, so this class needs no MPI: rank 0 calls nccl_unique_id(), the caller
// broadcasts the bytes (MPI_Bcast), every rank constructs the communicator with them.
using NcclIdBytes = std::array<char, 128>;  // NCCL_UNIQUE_ID_BYTES
NcclIdBytes nccl_unique_id();
class NcclCommunicator {
 public:
  // Collective over all `size` ranks; the current device must be selected first. timeout_s bounds every
  // wait: an operation still running after it, or an asynchronous NCCL error, aborts the communicator
  // and throws (the caller then ends the job).
  NcclCommunicator(int rank, int size, const NcclIdBytes& id, double timeout_s = 600.0);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  int rank() const;
  int size() const;
  // In place sum over ranks of dev [n] (device memory), on the communicator's own stream. The stream first
  // waits for `after` (work that produced dev); returns when the reduction has finished.
  void allreduce_sum(float* dev, int64_t n, CudaStream after = nullptr);
  // The same, started: enqueued on the communicator's stream after `after`'s work so far, and returns at
  // once (a gradient bucket overlapped with the rest of backward). wait_started() returns when everything
  // started has finished; nothing may touch those buffers before.
  void start_allreduce_sum(float* dev, int64_t n, CudaStream after = nullptr);
  // The same with 16 bits on the wire (--reduce-precision; `wire` BF16 or FP16): on the communicator's
  // stream dev is rounded into a 16-bit buffer of this bucket's own, summed by NCCL in that format (NCCL
  // adds in its own order, rounding each partial sum to 16 bits) and widened back into dev.
  void start_allreduce_sum_16bit(float* dev, int64_t n, Precision wire, CudaStream after = nullptr);
  void wait_started();
  CudaStream stream() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------- 16-bit operands (src/cuda/cast.cu)
// The BF16 and FP16 convolutions and dense layers keep every tensor in float and round only their operands to
// 16 bits on the way into cuDNN/cuBLAS (docs/precision.md). `half` is a device array of n 16-bit values as raw
// bits (this header includes no CUDA header): bfloat16 for Precision::BF16, IEEE binary16 for Precision::FP16;
// any other precision throws. Rounding is to nearest, ties to even. FP16 overflows to ±Inf from 65520 up (what
// rounds beyond its largest value, 65504), which the loss scaler's non-finite count then sees; NaN stays NaN.
// half [n] = round(in [n])
void cast_to_16bit(void* half, const float* in, int64_t n, Precision precision, CudaStream stream);
// out [n] = half [n] (exact: every 16-bit value is a float)
void cast_from_16bit(float* out, const void* half, int64_t n, Precision precision, CudaStream stream);
// acc [n] += half [n] (a 16-bit weight gradient added to the float one)
void accumulate_16bit(float* acc, const void* half, int64_t n, Precision precision, CudaStream stream);
// Device memory the current device holds for those operands (src/cuda/low_precision.cpp): one scratch shared by
// every 16-bit convolution and dense layer, grown to the largest need, for memory planning to count beside the
// activations. 0 when no 16-bit layer ran there, and in a CPU-only build.
size_t low_precision_scratch_bytes();

// ---------------------------------------------------------------- cuDNN convolution (src/cuda/conv_cudnn.cpp)
// NCHW float convolution through cuDNN with the same contract as ops::cpu::conv2d_*: forward overwrites out and
// adds bias; backward overwrites din (when non-null) and ACCUMULATES dweight and dbias (dbias may be null).
// The algorithms are chosen once per shape (cached for the process) among those whose workspace fits
// max_workspace_bytes. `precision` (hetrain/precision.hpp): FP32 FMA math; TF32 tensor-core math; or BF16/FP16
// operands (the float data cast on the way in and out, FP32 accumulation, docs/precision.md). All convolutions on a
// device share one workspace, and the 16-bit ones one operand scratch (low_precision_scratch_bytes()): never run
// two of them at the same time on different streams.
struct CudnnConvOptions {
  size_t max_workspace_bytes = size_t(256) << 20;
  Precision precision = Precision::FP32;
  bool deterministic = false;  // only algorithms whose results do not depend on scheduling
};
// Algorithm choices so far in this process (each new shape measures its algorithms once, which can take far
// longer than a step: the trainer keeps such steps out of the balancer's timings). 0 without CUDA.
int64_t conv_algorithm_searches();
// Of those, the choices left to cuDNN's heuristics because the device had no memory to measure in.
int64_t conv_algorithm_heuristic_choices();
class CudnnConv2d {
 public:
  CudnnConv2d(const Conv2dGeom& g, const CudnnConvOptions& options = {});
  ~CudnnConv2d();
  CudnnConv2d(const CudnnConv2d&) = delete;
  CudnnConv2d& operator=(const CudnnConv2d&) = delete;
  void forward(float* out, const float* in, const float* weight, const float* bias, CudaStream stream);
  void backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                CudaStream stream);
  // Names of the chosen algorithms, e.g. "fwd=IMPLICIT_PRECOMP_GEMM bwd_data=1 bwd_filter=1", and the
  // workspace they use.
  std::string algorithms() const;
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------- batch norm (src/cuda/batchnorm_cudnn.cpp)
// cuDNN spatial batch norm with ops::cpu::batchnorm_*'s contract, per channel over N·HW values of in [N, C, HW]:
// training saves mean and invstd = 1/sqrt(biased var + eps) [C] and updates the running stats with PyTorch's
// convention, running = (1-momentum)·running + momentum·batch, running_var from the unbiased variance.
// Null running_mean/running_var: not updated; null gamma/beta: 1/0. Training needs N·HW > 1; N = 0 does
// nothing. Backward overwrites din and ACCUMULATES dgamma, dbeta; any of the three may be null. It takes the
// forward's eps (cuDNN wants the same value in both).
void batchnorm_forward_train(float* out, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             const float* in, const float* gamma, const float* beta, int N, int C, int HW,
                             float momentum, float eps, CudaStream stream);
void batchnorm_forward_eval(float* out, const float* in, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, int N, int C, int HW, float eps,
                            CudaStream stream);
void batchnorm_backward(float* din, float* dgamma, float* dbeta, const float* dout, const float* in,
                        const float* gamma, const float* save_mean, const float* save_invstd, int N, int C, int HW,
                        float eps, CudaStream stream);

// ---------------------------------------------------------------- pooling (src/cuda/pool2d_cudnn.cpp, kernels/pool.cu)
// Square windows with Pool2dGeom (floor output size, pad ≤ kernel/2); out [N, C, P, Q]. Backward
// overwrites din [N, C, H, W]. Max pooling keeps no argmax (unlike ops::cpu::maxpool2d_*): its backward takes the
// forward's in and out, and sends each gradient to the window's maximum (cuDNN's deterministic mode).
void maxpool2d_forward(float* out, const float* in, const Pool2dGeom& g, CudaStream stream);
void maxpool2d_backward(float* din, const float* dout, const float* out, const float* in, const Pool2dGeom& g,
                        CudaStream stream);
// Average pooling counts padding as zeros (PyTorch's count_include_pad=True): every window divides by kernel².
// Backward takes the forward's in [N, C, H, W] (cuDNN's call wants it, though the gradient does not depend on
// its values); din must be another buffer.
void avgpool2d_forward(float* out, const float* in, const Pool2dGeom& g, CudaStream stream);
void avgpool2d_backward(float* din, const float* dout, const float* in, const Pool2dGeom& g, CudaStream stream);
// out [N, C] = mean over HW of in [N, C, HW]; backward: din [N, C, HW] = dout / HW (overwritten).
void global_avgpool_forward(float* out, const float* in, int N, int C, int HW, CudaStream stream);
void global_avgpool_backward(float* din, const float* dout, int N, int C, int HW, CudaStream stream);

// ---------------------------------------------------------------- activation (kernels/relu.cu)
// out [n] = max(in, 0); din [n] = dout·[out > 0] (from the forward's output, as ops::cpu::relu_backward), bit for
// bit as the CPU (a NaN input gives 0). Both may run in place (out == in, din == dout).
void relu_forward(float* out, const float* in, int64_t n, CudaStream stream);
void relu_backward(float* din, const float* dout, const float* out, int64_t n, CudaStream stream);

// ---------------------------------------------------------------- dense layer (src/cuda/linear_cublas.cpp)
// Row-major, as ops::cpu::linear_*: out [N, O] = in [N, I] · weight [O, I]ᵀ + bias [O] (bias may be null).
// Backward overwrites din [N, I] and ACCUMULATES dweight [O, I] and dbias [O]; each may be null (not needed).
// precision: FP32; TF32 tensor-core products (10-bit mantissa); or BF16/FP16 operands with FP32 accumulation
// (docs/precision.md). The data in and out stays float. At BF16/FP16 the operands are cast into the device's
// shared 16-bit scratch (as the convolutions'): never run two such calls at the same time on different streams.
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N, int I, int O,
                    CudaStream stream, Precision precision = Precision::FP32);
void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int N, int I, int O, CudaStream stream, Precision precision = Precision::FP32);

}  // namespace cuda
}  // namespace hetrain
