// src/cuda/conv_cudnn.cpp — NCHW float convolution through cuDNN's convolution API.
//
// Algorithms are measured once per shape with cudnnFind*AlgorithmEx and cached for the process: a ResNet
// repeats a handful of shapes, and measuring costs far more than a step. Only algorithms whose workspace
// fits the bound are considered. All convolutions of a device share one workspace, grown to the largest
// need: layers run one after another on one stream, so a ResNet-50 holds one layer's workspace instead of
// the sum over its 53 convolutions (each up to the bound). The contract is ops::cpu::conv2d_*'s: forward overwrites, dweight/dbias accumulate (beta = 1).
//
// BF16 and FP16 (docs/precision.md). Tensors stay float; only the convolution's operands are 16-bit. The
// x, w and y descriptors take the 16-bit type and the convolution descriptor computes in float: cuDNN's
// PSEUDO_BFLOAT16 / PSEUDO_HALF configurations, products accumulated in FP32, tensor-core math. What is
// cast where (src/cuda/cast.cu, into the device's 16-bit scratch, src/cuda/low_precision.hpp):
//   forward:         x, w → 16 bits; y16 = conv(x16, w16); out = float(y16); out += bias in FP32
//   backward data:   dout, w → 16 bits; dx16 = conv_bwd_data(w16, dout16); din = float(dx16) (overwritten)
//   backward filter: in → 16 bits; dw16 = conv_bwd_filter(x16, dout16) with beta = 0; dweight += float(dw16)
//   bias gradient:   in FP32 from the float dout, as at every precision
// The bias stays out of the 16-bit path (an FP32 y descriptor serves cudnnAddTensor and
// cudnnConvolutionBackwardBias), so the one rounding of a forward is y's. dw16 cannot accumulate in place:
// the float gradient is not a 16-bit tensor, so cuDNN writes the step's gradient into scratch and a kernel
// adds it. The FP16 consequence: y16, dx16 and dw16 must fit in ±65504 — the loss scale sizes dout so that
// they do, and an overflow becomes Inf, which the loss scaler's non-finite count detects.
// The weight is cast again in backward rather than kept from forward: a copy kept per layer between the two
// would cost 16-bit weights for every layer of the model, stale the moment the optimizer steps, while the
// cast is a pass over the weights, small next to the activations the same layer casts.
// The scratch is carved into three regions, sized by the layer's shapes: A (x-sized), B (y-sized), C (w-sized).
// Forward uses A = x16, B = y16, C = w16. Backward: B = dout16, C = w16, A = dx16 (cast to din), then
// A = x16 and C = dw16 — each reuse comes after the last reader of the region on the same stream.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "cuda/check.cuh"
#include "cuda/handles.hpp"
#include "cuda/low_precision.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {

struct Algos {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
  size_t workspace;
  bool measured;  // false: chosen by cuDNN's heuristics for want of memory, so not cached (asked again later)
};

using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int, bool, size_t>;
std::mutex g_cache_mutex;
std::map<Key, Algos> g_cache;
std::atomic<int64_t> g_searches{0}, g_heuristic_choices{0};

// The current device's shared workspace, at least `bytes` long (bytes == 0: as it is, possibly empty).
// Growing it waits for the device before freeing the old block, which a convolution still running on any
// stream may be using (cudaFree's own wait is how it behaves, not what its documentation promises).
DeviceBuffer<char>& shared_workspace_buffer(size_t bytes) {
  static std::mutex mu;
  static std::map<int, DeviceBuffer<char>> by_device;
  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  DeviceBuffer<char>& ws = by_device[dev];
  if (ws.size() < bytes) {
    HT_CUDA_CHECK(cudaDeviceSynchronize());
    ws = DeviceBuffer<char>();
    ws = DeviceBuffer<char>(bytes);
  }
  return ws;
}
char* shared_workspace(size_t bytes) { return bytes == 0 ? nullptr : shared_workspace_buffer(bytes).data(); }

size_t free_device_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  HT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// Floats to the next 64 (256 bytes): where the search's FP32 operands start within their one buffer, so
// each is as aligned as a tensor of its own (cudaMalloc), which vectorised and tensor-core kernels want.
int64_t aligned_floats(int64_t n) { return (n + 63) / 64 * 64; }

// The fastest result that succeeded, fits the workspace bound, is deterministic (if asked) and, at FP32,
// runs in plain FP32 FMA math (CUDNN_DEFAULT_MATH may use TF32 tensor cores for float data). TF32 and the
// 16-bit precisions take any math type: with 16-bit operands every one accumulates in FP32 (the PSEUDO
// configurations), whether on tensor cores or not.
template <typename Perf>
const Perf* pick(const Perf* results, int count, size_t max_ws, bool deterministic, Precision precision) {
  for (int i = 0; i < count; ++i) {  // cuDNN sorts by time
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > max_ws) continue;
    if (precision == Precision::FP32 && r.mathType != CUDNN_FMA_MATH) continue;
    if (deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    return &r;
  }
  return nullptr;
}

// The element type of the convolution's x, w and y at `precision`.
cudnnDataType_t operand_type(Precision precision) {
  switch (precision) {
    case Precision::BF16: return CUDNN_DATA_BFLOAT16;
    case Precision::FP16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
  }
}
}  // namespace

struct CudnnConv2d::Impl {
  Conv2dGeom g;
  CudnnConvOptions opt;
  // x, w, y: the convolution's operands, in operand_type(precision); y_float and bias: the float output and
  // the bias, for the bias and its gradient (the same layout as y in float).
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, y_float = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv_fwd = nullptr, conv_bwd_data = nullptr, conv_bwd_filter = nullptr;
  Algos algos{};
  int64_t n_in = 0, n_out = 0, n_w = 0;  // elements of x, y and w

  ~Impl() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (y_float) cudnnDestroyTensorDescriptor(y_float);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    for (auto c : {conv_fwd, conv_bwd_data, conv_bwd_filter})
      if (c) cudnnDestroyConvolutionDescriptor(c);
  }

  void make_conv(cudnnConvolutionDescriptor_t* c) {
    HT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(c));
    // CUDNN_CROSS_CORRELATION: what deep-learning "convolution" (and ops::cpu::conv2d) computes.
    HT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*c, g.pad, g.pad, g.stride, g.stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // The search below may still settle on another math type per direction (it reports the one it ran).
    HT_CUDNN_CHECK(cudnnSetConvolutionMathType(
        *c, opt.precision == Precision::FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  }

  bool low_precision() const { return is_16bit(opt.precision); }

  // The 16-bit operands in the device's scratch: regions A (x-sized), B (y-sized), C (w-sized), see the top
  // of this file.
  struct Scratch {
    void *a, *b, *c;
  };
  size_t scratch_bytes() const {
    return detail::half_region_bytes(n_in) + detail::half_region_bytes(n_out) + detail::half_region_bytes(n_w);
  }
  Scratch scratch() const {
    char* base = detail::low_precision_scratch(scratch_bytes());
    char* b = base + detail::half_region_bytes(n_in);
    return {base, b, b + detail::half_region_bytes(n_out)};
  }

  // Chooses the three directions' algorithms. Measured with cudnnFind*Ex on buffers allocated here: the
  // operands (the 16-bit scratch regions at BF16/FP16, a temporary of x, y and w at FP32 and TF32) and a
  // search workspace of at most the bound and half the memory free once the operands are in place (or the
  // shared workspace, idle during the search, where that is larger), all released when the search is
  // done. The plain cudnnFind* would allocate its own buffers, as large as each algorithm asks, and fail
  // with CUDNN_STATUS_ALLOC_FAILED near the memory cap, where a rebalanced batch size searches again
  // (docs/architecture.md, "Devices"). Where even these buffers do not fit, cuDNN's heuristics
  // (cudnnGet*_v7), which allocate nothing, choose among the algorithms whose workspace the shared one or
  // half the free memory holds; such a choice is not cached, so the shape is measured when memory allows.
  Algos choose(cudnnHandle_t h) {
    ++g_searches;
    const size_t max_ws = opt.max_workspace_bytes;
    DeviceBuffer<char> operands, workspace;
    void *xp = nullptr, *yp = nullptr, *wp = nullptr;
    void* ws = nullptr;
    size_t search_ws = 0;
    bool measured = true;
    // The search writes the operand buffers, the 16-bit scratch among them, and may use the shared
    // workspace, which a step still running on another stream may be using: searches are rare (a new
    // shape), so wait for the device first.
    HT_CUDA_CHECK(cudaDeviceSynchronize());
    DeviceBuffer<char>& shared = shared_workspace_buffer(0);
    try {
      if (low_precision()) {
        const Scratch sc = scratch();
        xp = sc.a, yp = sc.b, wp = sc.c;
      } else {
        const int64_t at_y = aligned_floats(n_in), at_w = at_y + aligned_floats(n_out);
        operands = DeviceBuffer<char>(size_t(at_w + n_w) * sizeof(float));
        float* base = reinterpret_cast<float*>(operands.data());
        xp = base, yp = base + at_y, wp = base + at_w;
      }
      const size_t own = std::min(max_ws, free_device_bytes() / 2);
      if (std::min(shared.size(), max_ws) >= own) {
        ws = shared.data(), search_ws = std::min(shared.size(), max_ws);
      } else {
        workspace = DeviceBuffer<char>(own);
        ws = workspace.data(), search_ws = own;
      }
    } catch (const Error&) {
      measured = false;  // out of memory: device_alloc took the error out of the runtime
      operands = DeviceBuffer<char>();
      search_ws = std::min(max_ws, std::max(shared.size(), free_device_bytes() / 2));
    }
    const int kMax = 16;
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t fr[kMax];
    cudnnConvolutionBwdDataAlgoPerf_t dr[kMax];
    cudnnConvolutionBwdFilterAlgoPerf_t wr[kMax];
    const cudnnConvolutionFwdAlgoPerf_t* f = nullptr;
    const cudnnConvolutionBwdDataAlgoPerf_t* d = nullptr;
    const cudnnConvolutionBwdFilterAlgoPerf_t* b = nullptr;
    if (measured) {
      HT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, x, xp, w, wp, conv_fwd, y, yp, kMax, &n, fr, ws,
                                                            search_ws));
      f = pick(fr, n, search_ws, opt.deterministic, opt.precision);
      HT_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, w, wp, y, yp, conv_bwd_data, x, xp, kMax, &n, dr,
                                                                 ws, search_ws));
      d = pick(dr, n, search_ws, opt.deterministic, opt.precision);
      HT_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x, xp, y, yp, conv_bwd_filter, w, wp, kMax, &n,
                                                                   wr, ws, search_ws));
      b = pick(wr, n, search_ws, opt.deterministic, opt.precision);
    } else {
      HT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv_fwd, y, kMax, &n, fr));
      f = pick(fr, n, search_ws, opt.deterministic, opt.precision);
      HT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv_bwd_data, x, kMax, &n, dr));
      d = pick(dr, n, search_ws, opt.deterministic, opt.precision);
      HT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv_bwd_filter, w, kMax, &n, wr));
      b = pick(wr, n, search_ws, opt.deterministic, opt.precision);
    }
    HT_CHECK(f && d && b, "cuDNN has no convolution algorithm for ", shape(), " within a workspace of ",
             search_ws, " bytes", opt.deterministic ? " (deterministic only)" : "",
             measured ? "" : " (chosen by heuristics: no memory to measure)",
             ": raise the workspace bound or free device memory");
    Algos a{};
    a.fwd = f->algo, a.fwd_math = f->mathType;
    a.bwd_data = d->algo, a.bwd_data_math = d->mathType;
    a.bwd_filter = b->algo, a.bwd_filter_math = b->mathType;
    a.workspace = std::max({f->memory, d->memory, b->memory});
    a.measured = measured;
    if (measured) {
      // The search ran on the default stream; the temporaries are freed (cudaFree waits for the device).
      HT_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    } else {
      ++g_heuristic_choices;
    }
    return a;
  }

  std::string shape() const {
    std::ostringstream os;
    os << "conv in [" << g.N << ", " << g.C << ", " << g.H << ", " << g.W << "] weight [" << g.K << ", " << g.C
       << ", " << g.R << ", " << g.S << "] stride " << g.stride << " pad " << g.pad;
    return os.str();
  }
};

int64_t conv_algorithm_searches() { return g_searches.load(); }
int64_t conv_algorithm_heuristic_choices() { return g_heuristic_choices.load(); }

CudnnConv2d::CudnnConv2d(const Conv2dGeom& g, const CudnnConvOptions& options) : impl_(new Impl) {
  HT_CHECK(g.N > 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.K > 0 && g.R > 0 && g.S > 0 && g.stride > 0 && g.pad >= 0,
           "CudnnConv2d: bad geometry");
  HT_CHECK(g.P() > 0 && g.Q() > 0, "CudnnConv2d: kernel larger than the padded input");
  Impl& m = *impl_;
  m.g = g, m.opt = options;
  m.n_in = int64_t(g.N) * g.C * g.H * g.W;
  m.n_out = int64_t(g.N) * g.K * g.P() * g.Q();
  m.n_w = int64_t(g.K) * g.C * g.R * g.S;
  const cudnnDataType_t t = operand_type(options.precision);
  HT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.x));
  HT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.x, CUDNN_TENSOR_NCHW, t, g.N, g.C, g.H, g.W));
  HT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.y));
  HT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.y, CUDNN_TENSOR_NCHW, t, g.N, g.K, g.P(), g.Q()));
  HT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.y_float));
  HT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.y_float, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g.N, g.K, g.P(), g.Q()));
  HT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.bias));
  HT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g.K, 1, 1));
  HT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m.w));
  HT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(m.w, t, CUDNN_TENSOR_NCHW, g.K, g.C, g.R, g.S));
  m.make_conv(&m.conv_fwd);
  m.make_conv(&m.conv_bwd_data);
  m.make_conv(&m.conv_bwd_filter);
  // cuDNN must agree on the output shape, or the descriptors above are wrong.
  int n = 0, k = 0, p = 0, q = 0;
  HT_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(m.conv_fwd, m.x, m.w, &n, &k, &p, &q));
  HT_CHECK(n == g.N && k == g.K && p == g.P() && q == g.Q(), "CudnnConv2d: cuDNN output shape differs for ",
           m.shape());

  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  const Key key{dev, g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.stride, g.pad, int(options.precision), options.deterministic,
                options.max_workspace_bytes};
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      m.algos = it->second;
    } else {
      // The search runs (and times) real convolutions on the handle's stream, so it gets one explicitly:
      // the legacy default stream, which always exists. Left alone, the handle would keep the stream of
      // its last call, which its owner may have destroyed since.
      m.algos = m.choose(detail::cudnn_on(nullptr));
      if (m.algos.measured) g_cache[key] = m.algos;
    }
  }
  // The measured algorithm ran with its own math type; use that one.
  HT_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv_fwd, m.algos.fwd_math));
  HT_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv_bwd_data, m.algos.bwd_data_math));
  HT_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv_bwd_filter, m.algos.bwd_filter_math));
  shared_workspace(m.algos.workspace);  // allocate now: out-of-memory shows up here, not mid-step
  if (m.low_precision()) detail::low_precision_scratch(m.scratch_bytes());  // likewise
}

CudnnConv2d::~CudnnConv2d() = default;

void CudnnConv2d::forward(float* out, const float* in, const float* weight, const float* bias, CudaStream stream) {
  Impl& m = *impl_;
  HT_CHECK(out && in && weight, "CudnnConv2d::forward: null pointer");
  const float one = 1.0f, zero = 0.0f;
  char* ws = shared_workspace(m.algos.workspace);
  if (m.low_precision()) {
    const Precision p = m.opt.precision;
    const Impl::Scratch s = m.scratch();
    cast_to_16bit(s.a, in, m.n_in, p, stream);
    cast_to_16bit(s.c, weight, m.n_w, p, stream);
    HT_CUDNN_CHECK(cudnnConvolutionForward(detail::cudnn_on(stream), &one, m.x, s.a, m.w, s.c, m.conv_fwd,
                                           m.algos.fwd, ws, m.algos.workspace, &zero, m.y, s.b));
    cast_from_16bit(out, s.b, m.n_out, p, stream);
  } else {
    HT_CUDNN_CHECK(cudnnConvolutionForward(detail::cudnn_on(stream), &one, m.x, in, m.w, weight, m.conv_fwd,
                                           m.algos.fwd, ws, m.algos.workspace, &zero, m.y, out));
  }
  if (bias) HT_CUDNN_CHECK(cudnnAddTensor(detail::cudnn_on(stream), &one, m.bias, bias, &one, m.y_float, out));
}

void CudnnConv2d::backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                           const float* weight, CudaStream stream) {
  Impl& m = *impl_;
  HT_CHECK(dout && in && weight && dweight, "CudnnConv2d::backward: null pointer");
  const float one = 1.0f, zero = 0.0f;
  char* ws = shared_workspace(m.algos.workspace);
  if (m.low_precision()) {
    const Precision p = m.opt.precision;
    const Impl::Scratch s = m.scratch();
    cast_to_16bit(s.b, dout, m.n_out, p, stream);
    if (din) {
      cast_to_16bit(s.c, weight, m.n_w, p, stream);
      HT_CUDNN_CHECK(cudnnConvolutionBackwardData(detail::cudnn_on(stream), &one, m.w, s.c, m.y, s.b,
                                                  m.conv_bwd_data, m.algos.bwd_data, ws, m.algos.workspace, &zero,
                                                  m.x, s.a));
      cast_from_16bit(din, s.a, m.n_in, p, stream);
    }
    cast_to_16bit(s.a, in, m.n_in, p, stream);  // after din's cast has read dx16 (same stream)
    // beta = 0 into C, which held w16 (read by backward data above); dweight gets the result added below.
    HT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(detail::cudnn_on(stream), &one, m.x, s.a, m.y, s.b,
                                                  m.conv_bwd_filter, m.algos.bwd_filter, ws, m.algos.workspace,
                                                  &zero, m.w, s.c));
    accumulate_16bit(dweight, s.c, m.n_w, p, stream);
  } else {
    if (din)
      HT_CUDNN_CHECK(cudnnConvolutionBackwardData(detail::cudnn_on(stream), &one, m.w, weight, m.y, dout,
                                                  m.conv_bwd_data, m.algos.bwd_data, ws, m.algos.workspace, &zero,
                                                  m.x, din));
    HT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(detail::cudnn_on(stream), &one, m.x, in, m.y, dout,
                                                  m.conv_bwd_filter, m.algos.bwd_filter, ws, m.algos.workspace,
                                                  &one, m.w, dweight));
  }
  if (dbias)
    HT_CUDNN_CHECK(cudnnConvolutionBackwardBias(detail::cudnn_on(stream), &one, m.y_float, dout, &one, m.bias, dbias));
}

std::string CudnnConv2d::algorithms() const {
  std::ostringstream os;
  os << "fwd=" << int(impl_->algos.fwd) << " bwd_data=" << int(impl_->algos.bwd_data)
     << " bwd_filter=" << int(impl_->algos.bwd_filter);
  return os.str();
}

size_t CudnnConv2d::workspace_bytes() const { return impl_->algos.workspace; }

}  // namespace hetrain::cuda
