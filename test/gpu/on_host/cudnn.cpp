// test/gpu/on_host/cudnn.cpp — the cuDNN calls hetrain makes (src/cuda/conv_cudnn.cpp, batchnorm_cudnn.cpp,
// pool2d_cudnn.cpp), on the host, for test_gpu_on_host and hetrain-on-host: plain loops over NCHW tensors that
// sum in double and store in the descriptor's type (float, bf16, fp16). These definitions take the place of
// libcudnn's for the program (still linked for cudnnGetVersion and cudnnGetErrorString).
//
// What is emulated, and how far (docs/testing.md, "GPU tests on the host"):
// - convolution (cross-correlation, any stride, padding and dilation, one group): forward, backward data,
//   backward filter, backward bias; two algorithms per direction. Algorithm 0 needs no workspace and, for
//   backward data and filter, is not deterministic (as cuDNN's algorithm 0); algorithm 1 is deterministic
//   and needs a workspace of one sample's im2col. The searches report fixed times (1 then 2 ms), not
//   measurements; cudnnFind*Ex reports an algorithm whose workspace exceeds the one given as failed, as
//   cuDNN does; a convolution given less workspace than its algorithm needs fails (CUDNN_STATUS_BAD_PARAM).
// - batch norm (spatial): training forward with the running statistics (unbiased variance) and the saved
//   mean and 1/sqrt(var + eps), inference forward, backward with cuDNN's alpha/beta blending.
// - pooling: max (deterministic; NaN propagates; backward sends the gradient to the window's first input
//   equal to the forward's output, as cuDNN finds it) and average counting the padding.
// - cudnnAddTensor with a [1, C, 1, 1] (or same-shape) A.
// Every operand must lie inside a device allocation, a convolution's output must not overlap its inputs,
// and the handle's stream must exist; anything else fails with a line on stderr.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <list>
#include <mutex>
#include <vector>

#include "runtime.hpp"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
};
struct cudnnFilterStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, r = 0, s = 0;
};
struct cudnnConvolutionStruct {
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
struct cudnnPoolingStruct {
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
  int win_h = 1, win_w = 1, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
};

namespace {
using hetrain::on_host::in_device_memory;

// Handles and descriptors live in lists, so the ones hetrain keeps to the end are no leaks.
template <class T>
struct Registry {
  std::mutex mutex;
  std::list<T> items;
  T* make() {
    std::lock_guard<std::mutex> lock(mutex);
    return &items.emplace_back();
  }
  void drop(T* p) {
    std::lock_guard<std::mutex> lock(mutex);
    items.remove_if([&](const T& t) { return &t == p; });
  }
};
Registry<cudnnContext> handles;
Registry<cudnnTensorStruct> tensors;
Registry<cudnnFilterStruct> filters;
Registry<cudnnConvolutionStruct> convolutions;
Registry<cudnnPoolingStruct> poolings;

cudnnStatus_t refuse(const char* call, const char* why, cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED) {
  std::fprintf(stderr, "cuda on host: %s: %s\n", call, why);
  return status;
}

size_t type_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
bool known_type(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

double load(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_HALF: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}
void store(void* p, cudnnDataType_t t, int64_t i, double v) {
  switch (t) {
    case CUDNN_DATA_HALF: static_cast<__half*>(p)[i] = __float2half_rn(float(v)); break;
    case CUDNN_DATA_BFLOAT16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(float(v)); break;
    default: static_cast<float*>(p)[i] = float(v);
  }
}

// Reads a tensor whole, as double.
std::vector<double> read(const void* p, cudnnDataType_t t, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = load(p, t, i);
  return v;
}
// out = alpha·value + beta·out, with beta 0 never reading out (it may hold NaN), as cuDNN documents.
void blend(void* p, cudnnDataType_t t, const std::vector<double>& value, double alpha, double beta) {
  for (size_t i = 0; i < value.size(); ++i)
    store(p, t, int64_t(i), beta == 0.0 ? alpha * value[i] : alpha * value[i] + beta * load(p, t, int64_t(i)));
}

int64_t count(const cudnnTensorStruct* d) { return int64_t(d->n) * d->c * d->h * d->w; }
int64_t count(const cudnnFilterStruct* d) { return int64_t(d->k) * d->c * d->r * d->s; }
bool on_device(const void* p, const cudnnTensorStruct* d) { return in_device_memory(p, size_t(count(d)) * type_bytes(d->type)); }
bool on_device(const void* p, const cudnnFilterStruct* d) { return in_device_memory(p, size_t(count(d)) * type_bytes(d->type)); }
double scalar(const void* p) { return *static_cast<const float*>(p); }  // float data: float alpha and beta
// Whether [a, a + an) and [b, b + bn) share a byte: cuDNN's convolutions do not work in place.
bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  return x < y + bn && y < x + an;
}
size_t bytes(const cudnnTensorStruct* d) { return size_t(count(d)) * type_bytes(d->type); }
size_t bytes(const cudnnFilterStruct* d) { return size_t(count(d)) * type_bytes(d->type); }
bool stream_ok(cudnnHandle_t h, const char* call) { return hetrain::on_host::usable_stream(h->stream, call); }

// ---------------------------------------------------------------- convolution
struct ConvShape {
  int N, C, H, W, K, R, S, P, Q, pad_h, pad_w, su, sv, dh, dw;
};
bool conv_shape(const cudnnTensorStruct* x, const cudnnFilterStruct* w, const cudnnConvolutionStruct* c,
                const cudnnTensorStruct* y, ConvShape* s) {
  if (x->c != w->c || (y && (y->n != x->n || y->c != w->k))) return false;
  *s = ConvShape{x->n, x->c, x->h, x->w, w->k, w->r, w->s, 0, 0, c->pad_h, c->pad_w, c->stride_h, c->stride_w,
                 c->dil_h, c->dil_w};
  s->P = (x->h + 2 * c->pad_h - c->dil_h * (w->r - 1) - 1) / c->stride_h + 1;
  s->Q = (x->w + 2 * c->pad_w - c->dil_w * (w->s - 1) - 1) / c->stride_w + 1;
  return s->P > 0 && s->Q > 0 && (!y || (y->h == s->P && y->w == s->Q));
}
// Calls f(x index, w index, y index) for every product of the convolution: each output's products in the
// order (c, r, s), the output column innermost (the loop that has to be fast).
template <class F>
void for_each_product(const ConvShape& g, F f) {
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k)
      for (int c = 0; c < g.C; ++c)
        for (int r = 0; r < g.R; ++r)
          for (int s = 0; s < g.S; ++s) {
            const int64_t wi = ((int64_t(k) * g.C + c) * g.R + r) * g.S + s;
            const int shift = s * g.dw - g.pad_w;  // input column = q·stride + shift
            const int q_lo = shift >= 0 ? 0 : (-shift + g.sv - 1) / g.sv;
            const int last = g.W - 1 - shift;
            const int q_hi = last < 0 ? 0 : std::min(g.Q, last / g.sv + 1);
            for (int p = 0; p < g.P; ++p) {
              const int h = p * g.su - g.pad_h + r * g.dh;
              if (h < 0 || h >= g.H) continue;
              const int64_t x_row = ((int64_t(n) * g.C + c) * g.H + h) * g.W + shift;
              const int64_t y_row = ((int64_t(n) * g.K + k) * g.P + p) * g.Q;
              for (int q = q_lo; q < q_hi; ++q) f(x_row + int64_t(q) * g.sv, wi, y_row + q);
            }
          }
}

// The two algorithms of each direction (see the file's header).
size_t workspace_of(int algo, const ConvShape& g) {
  return algo == 0 ? 0 : size_t(g.C) * g.R * g.S * g.P * g.Q * sizeof(float);
}
template <class Perf, class Algo>
void report(Perf* results, int* returned, int requested, const ConvShape& g, cudnnMathType_t math,
            bool algo0_deterministic, size_t workspace_given, bool measured) {
  *returned = 0;
  for (int a = 0; a < 2 && *returned < requested; ++a) {
    Perf& r = results[(*returned)++];
    r = Perf{};
    r.algo = Algo(a);
    r.memory = workspace_of(a, g);
    r.status = measured && r.memory > workspace_given ? CUDNN_STATUS_ALLOC_FAILED : CUDNN_STATUS_SUCCESS;
    r.time = measured && r.status == CUDNN_STATUS_SUCCESS ? float(a + 1) : -1.0f;
    r.determinism = a == 0 && !algo0_deterministic ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
    r.mathType = math == CUDNN_DEFAULT_MATH ? CUDNN_FMA_MATH : math;
  }
  // cuDNN lists the ones that ran first, fastest first
  std::stable_sort(results, results + *returned, [](const Perf& a, const Perf& b) {
    return (a.status == CUDNN_STATUS_SUCCESS) > (b.status == CUDNN_STATUS_SUCCESS);
  });
}

cudnnStatus_t check_workspace(const char* call, int algo, const ConvShape& g, const void* ws, size_t ws_bytes) {
  if (algo < 0 || algo > 1) return refuse(call, "an algorithm the host cuDNN does not have");
  if (ws_bytes < workspace_of(algo, g)) return refuse(call, "less workspace than the algorithm needs", CUDNN_STATUS_BAD_PARAM);
  if (ws_bytes > 0 && !in_device_memory(ws, ws_bytes)) return refuse(call, "a workspace outside device memory");
  return CUDNN_STATUS_SUCCESS;
}
// Calls f(y index, x index of the window's element or -1 for padding) for every window element.
template <class F>
void for_each_window(const cudnnPoolingStruct* p, const cudnnTensorStruct* x, const cudnnTensorStruct* y, F f) {
  for (int64_t plane = 0; plane < int64_t(x->n) * x->c; ++plane)
    for (int i = 0; i < y->h; ++i)
      for (int j = 0; j < y->w; ++j) {
        const int64_t yi = (plane * y->h + i) * y->w + j;
        for (int r = 0; r < p->win_h; ++r)
          for (int s = 0; s < p->win_w; ++s) {
            const int h = i * p->stride_h - p->pad_h + r, w = j * p->stride_w - p->pad_w + s;
            f(yi, h < 0 || h >= x->h || w < 0 || w >= x->w ? int64_t(-1) : (plane * x->h + h) * x->w + w);
          }
      }
}
bool pool_shape_ok(const cudnnPoolingStruct* p, const cudnnTensorStruct* x, const cudnnTensorStruct* y) {
  return x->n == y->n && x->c == y->c && y->h == (x->h + 2 * p->pad_h - p->win_h) / p->stride_h + 1 &&
         y->w == (x->w + 2 * p->pad_w - p->win_w) / p->stride_w + 1;
}
// The x index each window's maximum comes from (the first one; a NaN wins), per y element.
std::vector<int64_t> argmax(const cudnnPoolingStruct* p, const cudnnTensorStruct* x, const cudnnTensorStruct* y,
                            const std::vector<double>& xv) {
  std::vector<int64_t> best(static_cast<size_t>(count(y)), -1);
  for_each_window(p, x, y, [&](int64_t yi, int64_t xi) {
    if (xi < 0) return;
    int64_t& b = best[size_t(yi)];
    if (b < 0 || (!std::isnan(xv[size_t(b)]) && (std::isnan(xv[size_t(xi)]) || xv[size_t(xi)] > xv[size_t(b)]))) b = xi;
  });
  return best;
}
}  // namespace

extern "C" {
// ---------------------------------------------------------------- handles and descriptors
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = handles.make();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  handles.drop(h);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t stream) {
  h->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  *d = tensors.make();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  tensors.drop(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format, cudnnDataType_t type,
                                         int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW || !known_type(type)) return refuse("cudnnSetTensor4dDescriptor", "not NCHW float/half/bf16");
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnTensorStruct{type, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  *d = filters.make();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  filters.drop(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW || !known_type(type)) return refuse("cudnnSetFilter4dDescriptor", "not NCHW float/half/bf16");
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnFilterStruct{type, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  *d = convolutions.make();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  convolutions.drop(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (mode != CUDNN_CROSS_CORRELATION || compute != CUDNN_DATA_FLOAT)
    return refuse("cudnnSetConvolution2dDescriptor", "only cross-correlation computed in float");
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0) return CUDNN_STATUS_BAD_PARAM;
  const cudnnMathType_t math = d->math;
  *d = cudnnConvolutionStruct{pad_h, pad_w, u, v, dil_h, dil_w, mode, math};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int* n, int* k, int* p, int* q) {
  ConvShape g;
  if (!conv_shape(x, w, c, nullptr, &g)) return CUDNN_STATUS_BAD_PARAM;
  *n = g.N, *k = g.K, *p = g.P, *q = g.Q;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* d) {
  *d = poolings.make();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  poolings.drop(d);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int win_h, int win_w, int pad_h, int pad_w,
                                          int stride_h, int stride_w) {
  if (mode != CUDNN_POOLING_MAX_DETERMINISTIC && mode != CUDNN_POOLING_MAX &&
      mode != CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
    return refuse("cudnnSetPooling2dDescriptor", "a pooling mode hetrain does not use");
  if (win_h <= 0 || win_w <= 0 || pad_h < 0 || pad_w < 0 || stride_h <= 0 || stride_w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnPoolingStruct{mode, nan, win_h, win_w, pad_h, pad_w, stride_h, stride_w};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- algorithm choice
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* results) {
  ConvShape g;
  if (!conv_shape(x, w, c, y, &g)) return CUDNN_STATUS_BAD_PARAM;
  report<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(results, returned, requested, g, c->math, true, 0, false);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t dx, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* results) {
  ConvShape g;
  if (!conv_shape(dx, w, c, dy, &g)) return CUDNN_STATUS_BAD_PARAM;
  report<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(results, returned, requested, g, c->math,
                                                                            false, 0, false);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t dw, int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
  ConvShape g;
  if (!conv_shape(x, dw, c, dy, &g)) return CUDNN_STATUS_BAD_PARAM;
  report<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(results, returned, requested, g, c->math,
                                                                                false, 0, false);
  return CUDNN_STATUS_SUCCESS;
}

// The searches check their operands and workspace like a run, then report (they do not run).
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const void* xp,
                                                     const cudnnFilterDescriptor_t w, const void* wp,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, void* yp, int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* results, void* ws,
                                                     size_t ws_bytes) {
  if (!stream_ok(h, "cudnnFindConvolutionForwardAlgorithmEx")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(x, w, c, y, &g)) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(xp, x) || !on_device(wp, w) || !on_device(yp, y) || (ws_bytes && !in_device_memory(ws, ws_bytes)))
    return refuse("cudnnFindConvolutionForwardAlgorithmEx", "an operand or workspace outside device memory");
  report<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(results, returned, requested, g, c->math, true,
                                                                    ws_bytes, true);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                          const void* wp, const cudnnTensorDescriptor_t dy,
                                                          const void* dyp, const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t dx, void* dxp, int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* results,
                                                          void* ws, size_t ws_bytes) {
  if (!stream_ok(h, "cudnnFindConvolutionBackwardDataAlgorithmEx")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(dx, w, c, dy, &g)) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(wp, w) || !on_device(dyp, dy) || !on_device(dxp, dx) || (ws_bytes && !in_device_memory(ws, ws_bytes)))
    return refuse("cudnnFindConvolutionBackwardDataAlgorithmEx", "an operand or workspace outside device memory");
  report<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(results, returned, requested, g, c->math,
                                                                            false, ws_bytes, true);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const void* xp, const cudnnTensorDescriptor_t dy,
                                                            const void* dyp, const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t dw, void* dwp, int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* results,
                                                            void* ws, size_t ws_bytes) {
  if (!stream_ok(h, "cudnnFindConvolutionBackwardFilterAlgorithmEx")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(x, dw, c, dy, &g)) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(xp, x) || !on_device(dyp, dy) || !on_device(dwp, dw) || (ws_bytes && !in_device_memory(ws, ws_bytes)))
    return refuse("cudnnFindConvolutionBackwardFilterAlgorithmEx", "an operand or workspace outside device memory");
  report<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(results, returned, requested, g, c->math,
                                                                                false, ws_bytes, true);
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- convolution
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t x,
                                      const void* xp, const cudnnFilterDescriptor_t w, const void* wp,
                                      const cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo, void* ws,
                                      size_t ws_bytes, const void* beta, const cudnnTensorDescriptor_t y, void* yp) {
  if (!stream_ok(h, "cudnnConvolutionForward")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(x, w, c, y, &g) || x->type != w->type || x->type != y->type) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(xp, x) || !on_device(wp, w) || !on_device(yp, y))
    return refuse("cudnnConvolutionForward", "an operand outside device memory");
  if (cudnnStatus_t s = check_workspace("cudnnConvolutionForward", int(algo), g, ws, ws_bytes); s) return s;
  if (overlap(yp, bytes(y), xp, bytes(x)) || overlap(yp, bytes(y), wp, bytes(w)) ||
      (ws_bytes && overlap(yp, bytes(y), ws, ws_bytes)))
    return refuse("cudnnConvolutionForward", "the output overlaps an input or the workspace", CUDNN_STATUS_BAD_PARAM);
  const std::vector<double> xv = read(xp, x->type, count(x)), wv = read(wp, w->type, count(w));
  std::vector<double> yv(static_cast<size_t>(count(y)), 0.0);
  for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { yv[size_t(yi)] += xv[size_t(xi)] * wv[size_t(wi)]; });
  blend(yp, y->type, yv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha, const cudnnFilterDescriptor_t w,
                                           const void* wp, const cudnnTensorDescriptor_t dy, const void* dyp,
                                           const cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo,
                                           void* ws, size_t ws_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dx, void* dxp) {
  if (!stream_ok(h, "cudnnConvolutionBackwardData")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(dx, w, c, dy, &g) || dx->type != w->type || dx->type != dy->type) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(wp, w) || !on_device(dyp, dy) || !on_device(dxp, dx))
    return refuse("cudnnConvolutionBackwardData", "an operand outside device memory");
  if (cudnnStatus_t s = check_workspace("cudnnConvolutionBackwardData", int(algo), g, ws, ws_bytes); s) return s;
  if (overlap(dxp, bytes(dx), dyp, bytes(dy)) || overlap(dxp, bytes(dx), wp, bytes(w)) ||
      (ws_bytes && overlap(dxp, bytes(dx), ws, ws_bytes)))
    return refuse("cudnnConvolutionBackwardData", "the output overlaps an input or the workspace", CUDNN_STATUS_BAD_PARAM);
  const std::vector<double> dyv = read(dyp, dy->type, count(dy)), wv = read(wp, w->type, count(w));
  std::vector<double> dxv(static_cast<size_t>(count(dx)), 0.0);
  for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { dxv[size_t(xi)] += dyv[size_t(yi)] * wv[size_t(wi)]; });
  blend(dxp, dx->type, dxv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t x,
                                             const void* xp, const cudnnTensorDescriptor_t dy, const void* dyp,
                                             const cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t algo,
                                             void* ws, size_t ws_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dw, void* dwp) {
  if (!stream_ok(h, "cudnnConvolutionBackwardFilter")) return CUDNN_STATUS_EXECUTION_FAILED;
  ConvShape g;
  if (!conv_shape(x, dw, c, dy, &g) || x->type != dw->type || x->type != dy->type) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(xp, x) || !on_device(dyp, dy) || !on_device(dwp, dw))
    return refuse("cudnnConvolutionBackwardFilter", "an operand outside device memory");
  if (cudnnStatus_t s = check_workspace("cudnnConvolutionBackwardFilter", int(algo), g, ws, ws_bytes); s) return s;
  if (overlap(dwp, bytes(dw), xp, bytes(x)) || overlap(dwp, bytes(dw), dyp, bytes(dy)) ||
      (ws_bytes && overlap(dwp, bytes(dw), ws, ws_bytes)))
    return refuse("cudnnConvolutionBackwardFilter", "the output overlaps an input or the workspace", CUDNN_STATUS_BAD_PARAM);
  const std::vector<double> xv = read(xp, x->type, count(x)), dyv = read(dyp, dy->type, count(dy));
  std::vector<double> dwv(static_cast<size_t>(count(dw)), 0.0);
  for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { dwv[size_t(wi)] += xv[size_t(xi)] * dyv[size_t(yi)]; });
  blend(dwp, dw->type, dwv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t dy,
                                           const void* dyp, const void* beta, const cudnnTensorDescriptor_t db,
                                           void* dbp) {
  if (!stream_ok(h, "cudnnConvolutionBackwardBias")) return CUDNN_STATUS_EXECUTION_FAILED;
  if (db->n != 1 || db->c != dy->c || db->h != 1 || db->w != 1) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(dyp, dy) || !on_device(dbp, db)) return refuse("cudnnConvolutionBackwardBias", "an operand outside device memory");
  std::vector<double> sum(static_cast<size_t>(dy->c), 0.0);
  const int64_t plane = int64_t(dy->h) * dy->w;
  for (int64_t i = 0; i < count(dy); ++i) sum[size_t((i / plane) % dy->c)] += load(dyp, dy->type, i);
  blend(dbp, db->type, sum, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t a, const void* ap,
                             const void* beta, const cudnnTensorDescriptor_t c, void* cp) {
  if (!stream_ok(h, "cudnnAddTensor")) return CUDNN_STATUS_EXECUTION_FAILED;
  const bool per_channel = a->n == 1 && a->c == c->c && a->h == 1 && a->w == 1;
  const bool same = a->n == c->n && a->c == c->c && a->h == c->h && a->w == c->w;
  if (!per_channel && !same) return refuse("cudnnAddTensor", "a broadcast other than [1, C, 1, 1]");
  if (!on_device(ap, a) || !on_device(cp, c)) return refuse("cudnnAddTensor", "an operand outside device memory");
  std::vector<double> v(static_cast<size_t>(count(c)));
  const int64_t plane = int64_t(c->h) * c->w;
  for (int64_t i = 0; i < count(c); ++i) v[size_t(i)] = load(ap, a->type, per_channel ? (i / plane) % c->c : i);
  blend(cp, c->type, v, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- batch norm (spatial: per channel over N·H·W)
cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha,
                                                     const void* beta, const cudnnTensorDescriptor_t x, const void* xp,
                                                     const cudnnTensorDescriptor_t y, void* yp,
                                                     const cudnnTensorDescriptor_t stats, const void* scale,
                                                     const void* bias, double factor, void* running_mean,
                                                     void* running_var, double eps, void* save_mean,
                                                     void* save_invstd) {
  if (!stream_ok(h, "cudnnBatchNormalizationForwardTraining")) return CUDNN_STATUS_EXECUTION_FAILED;
  if (mode != CUDNN_BATCHNORM_SPATIAL) return refuse("cudnnBatchNormalizationForwardTraining", "not spatial");
  const int C = x->c;
  const int64_t plane = int64_t(x->h) * x->w, M = int64_t(x->n) * plane;
  if (eps < CUDNN_BN_MIN_EPSILON || stats->c != C || M < 1) return CUDNN_STATUS_BAD_PARAM;
  if ((running_mean == nullptr) != (running_var == nullptr))
    return refuse("cudnnBatchNormalizationForwardTraining", "one running statistic without the other", CUDNN_STATUS_BAD_PARAM);
  const size_t cb = size_t(C) * sizeof(float);
  if (!on_device(xp, x) || !on_device(yp, y) || !in_device_memory(scale, cb) || !in_device_memory(bias, cb) ||
      (running_mean && !in_device_memory(running_mean, cb)) || (running_var && !in_device_memory(running_var, cb)) ||
      (save_mean && !in_device_memory(save_mean, cb)) || (save_invstd && !in_device_memory(save_invstd, cb)))
    return refuse("cudnnBatchNormalizationForwardTraining", "an operand outside device memory");
  const std::vector<double> xv = read(xp, x->type, count(x));
  std::vector<double> yv(xv.size());
  auto at = [&](int n, int c, int64_t i) { return size_t((int64_t(n) * C + c) * plane + i); };
  for (int c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < x->n; ++n)
      for (int64_t i = 0; i < plane; ++i) sum += xv[at(n, c, i)];
    const double mean = sum / double(M);
    for (int n = 0; n < x->n; ++n)
      for (int64_t i = 0; i < plane; ++i) sq += (xv[at(n, c, i)] - mean) * (xv[at(n, c, i)] - mean);
    const double var = sq / double(M), invstd = 1.0 / std::sqrt(var + eps);
    const double g = static_cast<const float*>(scale)[c], b = static_cast<const float*>(bias)[c];
    for (int n = 0; n < x->n; ++n)
      for (int64_t i = 0; i < plane; ++i) yv[at(n, c, i)] = g * (xv[at(n, c, i)] - mean) * invstd + b;
    if (running_mean && running_var) {
      float& rm = static_cast<float*>(running_mean)[c];
      float& rv = static_cast<float*>(running_var)[c];
      rm = float((1.0 - factor) * rm + factor * mean);
      rv = float((1.0 - factor) * rv + factor * (M > 1 ? var * double(M) / double(M - 1) : var));
    }
    if (save_mean) static_cast<float*>(save_mean)[c] = float(mean);
    if (save_invstd) static_cast<float*>(save_invstd)[c] = float(invstd);
  }
  blend(yp, y->type, yv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha,
                                                      const void* beta, const cudnnTensorDescriptor_t x, const void* xp,
                                                      const cudnnTensorDescriptor_t y, void* yp,
                                                      const cudnnTensorDescriptor_t stats, const void* scale,
                                                      const void* bias, const void* mean, const void* var, double eps) {
  if (!stream_ok(h, "cudnnBatchNormalizationForwardInference")) return CUDNN_STATUS_EXECUTION_FAILED;
  if (mode != CUDNN_BATCHNORM_SPATIAL) return refuse("cudnnBatchNormalizationForwardInference", "not spatial");
  const int C = x->c;
  const int64_t plane = int64_t(x->h) * x->w;
  if (eps < CUDNN_BN_MIN_EPSILON || stats->c != C) return CUDNN_STATUS_BAD_PARAM;
  const size_t cb = size_t(C) * sizeof(float);
  if (!on_device(xp, x) || !on_device(yp, y) || !in_device_memory(scale, cb) || !in_device_memory(bias, cb) ||
      !in_device_memory(mean, cb) || !in_device_memory(var, cb))
    return refuse("cudnnBatchNormalizationForwardInference", "an operand outside device memory");
  std::vector<double> yv = read(xp, x->type, count(x));
  for (size_t i = 0; i < yv.size(); ++i) {
    const int c = int((int64_t(i) / plane) % C);
    const double m = static_cast<const float*>(mean)[c], v = static_cast<const float*>(var)[c];
    yv[i] = static_cast<const float*>(scale)[c] * (yv[i] - m) / std::sqrt(v + eps) + static_cast<const float*>(bias)[c];
  }
  blend(yp, y->type, yv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha_data,
                                              const void* beta_data, const void* alpha_param, const void* beta_param,
                                              const cudnnTensorDescriptor_t x, const void* xp,
                                              const cudnnTensorDescriptor_t dy, const void* dyp,
                                              const cudnnTensorDescriptor_t dx, void* dxp,
                                              const cudnnTensorDescriptor_t stats, const void* scale, void* dscale,
                                              void* dbias, double eps, const void* save_mean, const void* save_invstd) {
  if (!stream_ok(h, "cudnnBatchNormalizationBackward")) return CUDNN_STATUS_EXECUTION_FAILED;
  if (mode != CUDNN_BATCHNORM_SPATIAL) return refuse("cudnnBatchNormalizationBackward", "not spatial");
  if (!save_mean || !save_invstd) return refuse("cudnnBatchNormalizationBackward", "without the saved statistics");
  const int C = x->c;
  const int64_t plane = int64_t(x->h) * x->w, M = int64_t(x->n) * plane;
  if (eps < CUDNN_BN_MIN_EPSILON || stats->c != C || M < 1) return CUDNN_STATUS_BAD_PARAM;
  const size_t cb = size_t(C) * sizeof(float);
  if (!on_device(xp, x) || !on_device(dyp, dy) || !on_device(dxp, dx) || !in_device_memory(scale, cb) ||
      !in_device_memory(dscale, cb) || !in_device_memory(dbias, cb) || !in_device_memory(save_mean, cb) ||
      !in_device_memory(save_invstd, cb))
    return refuse("cudnnBatchNormalizationBackward", "an operand outside device memory");
  const std::vector<double> xv = read(xp, x->type, count(x)), dyv = read(dyp, dy->type, count(dy));
  std::vector<double> dxv(xv.size()), dg(static_cast<size_t>(C)), db(static_cast<size_t>(C));
  auto at = [&](int n, int c, int64_t i) { return size_t((int64_t(n) * C + c) * plane + i); };
  for (int c = 0; c < C; ++c) {
    const double mean = static_cast<const float*>(save_mean)[c], invstd = static_cast<const float*>(save_invstd)[c];
    const double g = static_cast<const float*>(scale)[c];
    double sdy = 0, sdyx = 0;
    for (int n = 0; n < x->n; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        sdy += dyv[at(n, c, i)];
        sdyx += dyv[at(n, c, i)] * (xv[at(n, c, i)] - mean) * invstd;
      }
    for (int n = 0; n < x->n; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        const double xhat = (xv[at(n, c, i)] - mean) * invstd;
        dxv[at(n, c, i)] = g * invstd * (dyv[at(n, c, i)] - sdy / double(M) - xhat * sdyx / double(M));
      }
    dg[size_t(c)] = sdyx, db[size_t(c)] = sdy;
  }
  blend(dxp, dx->type, dxv, scalar(alpha_data), scalar(beta_data));
  blend(dscale, CUDNN_DATA_FLOAT, dg, scalar(alpha_param), scalar(beta_param));
  blend(dbias, CUDNN_DATA_FLOAT, db, scalar(alpha_param), scalar(beta_param));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}


// ---------------------------------------------------------------- pooling
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t p, const void* alpha,
                                  const cudnnTensorDescriptor_t x, const void* xp, const void* beta,
                                  const cudnnTensorDescriptor_t y, void* yp) {
  if (!stream_ok(h, "cudnnPoolingForward")) return CUDNN_STATUS_EXECUTION_FAILED;
  if (!pool_shape_ok(p, x, y)) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(xp, x) || !on_device(yp, y)) return refuse("cudnnPoolingForward", "an operand outside device memory");
  const std::vector<double> xv = read(xp, x->type, count(x));
  std::vector<double> yv(static_cast<size_t>(count(y)), 0.0);
  if (p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING) {
    const double area = double(p->win_h) * p->win_w;
    for_each_window(p, x, y, [&](int64_t yi, int64_t xi) { if (xi >= 0) yv[size_t(yi)] += xv[size_t(xi)] / area; });
  } else {
    const std::vector<int64_t> best = argmax(p, x, y, xv);
    for (size_t i = 0; i < yv.size(); ++i) yv[i] = best[i] < 0 ? -std::numeric_limits<double>::infinity() : xv[size_t(best[i])];
  }
  blend(yp, y->type, yv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t p, const void* alpha,
                                   const cudnnTensorDescriptor_t y, const void* yp, const cudnnTensorDescriptor_t dy,
                                   const void* dyp, const cudnnTensorDescriptor_t x, const void* xp, const void* beta,
                                   const cudnnTensorDescriptor_t dx, void* dxp) {
  if (!stream_ok(h, "cudnnPoolingBackward")) return CUDNN_STATUS_EXECUTION_FAILED;
  auto same = [](const cudnnTensorStruct* a, const cudnnTensorStruct* b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w;
  };
  if (!pool_shape_ok(p, x, y) || !same(dy, y) || !same(dx, x)) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(yp, y) || !on_device(dyp, dy) || !on_device(xp, x) || !on_device(dxp, dx))
    return refuse("cudnnPoolingBackward", "an operand outside device memory");
  const std::vector<double> dyv = read(dyp, dy->type, count(dy));
  std::vector<double> dxv(static_cast<size_t>(count(dx)), 0.0);
  if (p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING) {
    const double area = double(p->win_h) * p->win_w;
    for_each_window(p, x, y, [&](int64_t yi, int64_t xi) { if (xi >= 0) dxv[size_t(xi)] += dyv[size_t(yi)] / area; });
  } else {
    // As cuDNN: the gradient goes to the window's first x equal to the forward's output y, so a y that is
    // not the forward's output sends it elsewhere (or, matching nothing, nowhere).
    const std::vector<double> xv = read(xp, x->type, count(x)), yv = read(yp, y->type, count(y));
    std::vector<char> taken(yv.size(), 0);
    for_each_window(p, x, y, [&](int64_t yi, int64_t xi) {
      if (xi < 0 || taken[size_t(yi)]) return;
      const double a = xv[size_t(xi)], b = yv[size_t(yi)];
      if (a == b || (std::isnan(a) && std::isnan(b))) dxv[size_t(xi)] += dyv[size_t(yi)], taken[size_t(yi)] = 1;
    });
  }
  blend(dxp, dx->type, dxv, scalar(alpha), scalar(beta));
  hetrain::on_host::note_work(h->stream);
  return CUDNN_STATUS_SUCCESS;
}
}  // extern "C"
