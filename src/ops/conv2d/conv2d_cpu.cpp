// ops/conv2d/conv2d_cpu.cpp — the CPU convolution: which implementation runs (oneDNN when built with it, for float;
// im2col + GEMM otherwise), and the im2col + GEMM (OpenBLAS) implementation itself, forward and backward.
// The oneDNN one is in dnnl/; docs/cpu-performance.md compares them.
//
// One GEMM per sample, of the same shape whatever the batch: a sample's output and input gradient must
// not depend on the batch it is in (invariant 1 of docs/architecture.md — the balancer changes every
// rank's batch size). oneDNN's and OpenBLAS's AVX2 GEMMs pick their kernels, and so the order of the
// sums, by the matrix shape and by where a column falls in their tiles, so samples side by side in one
// wider GEMM (as this file did, ~1000 columns per GEMM) came out different in the last bit from the same
// samples in another batch. Per-sample GEMMs measured level with those groups on resnet20 here (batch 32,
// 2 threads; batch 128, 1 thread: within this machine's run-to-run noise; docs/cpu-performance.md).
//
// Threads: the samples are shared out among OpenMP threads, each with its own column matrix in the
// workspace; every GEMM runs on its calling thread alone, also in a team of one, where oneDNN would
// otherwise thread it and sum in another order (run_gemms_serially). The weight gradient is a sum over
// samples: thread 0 accumulates into dweight, the others into private [K, C·R·S] partials added
// afterwards in thread order (deterministic for a given thread count).
//
// 1×1 stride-1 unpadded convs need no unfolding: the input sample [C, H·W] already is the column matrix.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/conv2d/dnnl_conv.hpp"
#include "ops/common/gemm.hpp"
#include "ops/conv2d/im2col.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
int64_t plane(const Conv2dGeom& g) { return int64_t(g.P()) * g.Q(); }

// GEMM straight on the input: 1×1, stride 1, no padding.
bool is_direct(const Conv2dGeom& g) { return g.R == 1 && g.S == 1 && g.stride == 1 && g.pad == 0; }

int max_threads() { return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads()); }
int threads_for(const Conv2dGeom& g) { return std::min(max_threads(), std::max(g.N, 1)); }

// Called first in each parallel region below (see the top).
void run_gemms_serially() { omp_set_num_threads(1); }

void check_geom(const Conv2dGeom& g, const char* who) {
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.K > 0 && g.R > 0 && g.S > 0 && g.stride > 0 &&
               g.pad >= 0 && g.P() > 0 && g.Q() > 0,
           who, ": bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S,
           " stride=", g.stride, " pad=", g.pad);
  HT_CHECK(int64_t(g.C) * g.R * g.S * plane(g) < (int64_t(1) << 31),
           who, ": column matrix too large for 32-bit BLAS indices");
}

int64_t column_size(const Conv2dGeom& g) { return int64_t(g.C) * g.R * g.S * plane(g); }
}  // namespace

// Direct 1×1: 0. Otherwise, for t = min(threads, N): t column matrices of C·R·S × P·Q, plus (t − 1)
// weight-gradient partials of K × C·R·S. Non-decreasing in N for a given thread count.
int64_t conv2d_im2col_workspace_size(const Conv2dGeom& g) {
  check_geom(g, "conv2d_workspace_size");
  if (is_direct(g)) return 0;
  const int t = threads_for(g);
  return t * column_size(g) + int64_t(t - 1) * g.K * g.C * g.R * g.S;
}

namespace {

// out[n, k, :, :] += bias[k]
template <typename T>
void add_bias(T* out, const T* bias, const Conv2dGeom& g) {
  const int PQ = g.P() * g.Q();
  const int64_t out_stride = int64_t(g.K) * PQ;
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(g.N) * out_stride > (1 << 15))
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k) {
      T* o = out + n * out_stride + int64_t(k) * PQ;
      const T b = bias[k];
      for (int j = 0; j < PQ; ++j) o[j] += b;
    }
}

// dbias[k] += Σ_n Σ_pq dout[n, k, pq]
template <typename T>
void accumulate_dbias(T* dbias, const T* dout, const Conv2dGeom& g) {
  const int PQ = g.P() * g.Q();
  const int64_t out_stride = int64_t(g.K) * PQ;
#pragma omp parallel for schedule(static) if (int64_t(g.N) * out_stride > (1 << 15))
  for (int k = 0; k < g.K; ++k) {
    T acc = 0;
    for (int n = 0; n < g.N; ++n) {
      const T* d = dout + n * out_stride + int64_t(k) * PQ;
      T row = 0;
      for (int j = 0; j < PQ; ++j) row += d[j];
      acc += row;
    }
    dbias[k] += acc;
  }
}

}  // namespace

template <typename T>
void conv2d_forward_im2col(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g,
                           T* workspace) {
  check_geom(g, "conv2d_forward");
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;
  if (g.N == 0) return;
  const bool direct = is_direct(g);
  HT_CHECK(direct || workspace != nullptr, "conv2d_forward: workspace is null");
#pragma omp parallel num_threads(threads_for(g))
  {
    run_gemms_serially();
    T* col = direct ? nullptr : workspace + omp_get_thread_num() * column_size(g);
#pragma omp for schedule(static)
    for (int n = 0; n < g.N; ++n) {  // out_n [K, PQ] = W [K, CRS] · col_n [CRS, PQ]
      const T* cols = in + n * in_stride;
      if (!direct) {
        detail::im2col(col, PQ, cols, g);
        cols = col;
      }
      detail::gemm(false, false, g.K, PQ, CRS, T(1), weight, CRS, cols, PQ, T(0), out + n * out_stride, PQ);
    }
  }
  if (bias) add_bias(out, bias, g);
}

template <typename T>
void conv2d_backward_im2col(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                            const Conv2dGeom& g, T* workspace) {
  check_geom(g, "conv2d_backward");
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;

  if (dbias) accumulate_dbias(dbias, dout, g);
  if ((!din && !dweight) || g.N == 0) return;

  if (is_direct(g)) {
    const int t = threads_for(g);
    // dW [K, C] += Σ_n dout_n [K, HW] · in_nᵀ [HW, C]: each thread owns a band of rows of dW and runs over
    // all samples in order, so no partial sums are needed (and the bits do not depend on the thread count).
    if (dweight) {
#pragma omp parallel num_threads(std::min(t, g.K))
      {
        run_gemms_serially();
        const int b = omp_get_thread_num(), nbnd = omp_get_num_threads();
        const int k0 = int(int64_t(g.K) * b / nbnd), k1 = int(int64_t(g.K) * (b + 1) / nbnd);
        for (int n = 0; n < g.N; ++n)
          detail::gemm(false, true, k1 - k0, g.C, PQ, T(1), dout + n * out_stride + int64_t(k0) * PQ, PQ,
                       in + n * in_stride, PQ, T(1), dweight + int64_t(k0) * g.C, g.C);
      }
    }
    // din_n [C, HW] = Wᵀ [C, K] · dout_n [K, HW]
    if (din) {
#pragma omp parallel num_threads(t)
      {
        run_gemms_serially();
#pragma omp for schedule(static)
        for (int n = 0; n < g.N; ++n)
          detail::gemm(true, false, g.C, PQ, g.K, T(1), weight, g.C, dout + n * out_stride, PQ, T(0),
                       din + n * in_stride, PQ);
      }
    }
    return;
  }

  HT_CHECK(workspace != nullptr, "conv2d_backward: workspace is null");
  const int threads = threads_for(g);
  const int64_t wsize = int64_t(g.K) * CRS;
  T* partials = workspace + threads * column_size(g);  // (threads − 1) × [K, CRS]
#pragma omp parallel num_threads(threads)
  {
    run_gemms_serially();
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    T* col = workspace + t * column_size(g);
    T* acc = dweight;
    if (dweight && t > 0) {
      acc = partials + (t - 1) * wsize;
      std::fill(acc, acc + wsize, T(0));
    }
#pragma omp for schedule(static)
    for (int n = 0; n < g.N; ++n) {
      const T* dout_n = dout + n * out_stride;
      if (acc) {  // dW [K, CRS] += dout_n [K, PQ] · col_nᵀ [PQ, CRS]
        detail::im2col(col, PQ, in + n * in_stride, g);
        detail::gemm(false, true, g.K, CRS, PQ, T(1), dout_n, PQ, col, PQ, T(1), acc, CRS);
      }
      if (din) {  // dcol [CRS, PQ] = Wᵀ [CRS, K] · dout_n [K, PQ], folded back into din_n (col reused)
        detail::gemm(true, false, CRS, PQ, g.K, T(1), weight, CRS, dout_n, PQ, T(0), col, PQ);
        T* din_n = din + n * in_stride;
        std::fill(din_n, din_n + in_stride, T(0));
        detail::col2im_add(din_n, col, PQ, g);
      }
    }  // the implicit barrier of omp for: every partial is complete
    if (dweight && nt > 1) {
      // dW += partials, rows split among the threads, partials added in thread order.
      const int64_t r0 = wsize * t / nt, r1 = wsize * (t + 1) / nt;
      for (int q = 1; q < nt; ++q) {
        const T* part = partials + (q - 1) * wsize;
        for (int64_t i = r0; i < r1; ++i) dweight[i] += part[i];
      }
    }
  }
}

// ---------------------------------------------------------------- which implementation runs
namespace {
CpuConvBackend g_backend = CpuConvBackend::Auto;

// oneDNN has no double kernels; double is the gradient-check reference and always takes im2col.
template <typename T>
bool use_dnnl() {
  return std::is_same_v<T, float> && g_backend == CpuConvBackend::Auto && dnnl_conv::available();
}

// A strided, unpadded 1×1 convolution's backward goes to im2col + GEMM even with oneDNN: its "unfolding" is
// a gather, its GEMMs are plain ones, and oneDNN's kernels for it measured slower on every such layer of
// resnet18 and resnet50 here, up to 2.9× (resnet50's last projection, 1024→2048 at 14×14, stride 2, batch 8,
// 2 threads: 35.8 ms against 12.5; docs/cpu-performance.md). Forward they are level, so it stays with oneDNN.
bool backward_by_im2col(const Conv2dGeom& g) { return g.R == 1 && g.S == 1 && g.stride > 1 && g.pad == 0; }
}  // namespace

void set_cpu_conv_backend(CpuConvBackend backend) { g_backend = backend; }

const char* cpu_conv_backend_name() { return use_dnnl<float>() ? "onednn" : "im2col"; }

std::string cpu_kernels_description() {
  if (use_dnnl<float>()) return std::string("oneDNN ") + dnnl_conv::isa_name();
  return dnnl_conv::available() ? "im2col + GEMM" : "im2col + OpenBLAS (built without oneDNN)";
}

int64_t conv2d_workspace_size(const Conv2dGeom& g) {
  const int64_t im2col = conv2d_im2col_workspace_size(g);
  return use_dnnl<float>() && g.N > 0 ? std::max(im2col, dnnl_conv::workspace_floats(g)) : im2col;
}

template <typename T>
void conv2d_forward(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g, T* workspace) {
  if constexpr (std::is_same_v<T, float>) {
    if (use_dnnl<T>()) {
      check_geom(g, "conv2d_forward");
      if (g.N == 0) return;
      dnnl_conv::forward(out, in, weight, g, workspace);
      if (bias) add_bias(out, bias, g);
      return;
    }
  }
  conv2d_forward_im2col(out, in, weight, bias, g, workspace);
}

template <typename T>
void conv2d_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                     const Conv2dGeom& g, T* workspace) {
  if constexpr (std::is_same_v<T, float>) {
    if (use_dnnl<T>() && !backward_by_im2col(g)) {
      check_geom(g, "conv2d_backward");
      if (dbias) accumulate_dbias(dbias, dout, g);
      if (g.N == 0) return;
      dnnl_conv::backward(din, dweight, dout, in, weight, g, workspace);
      return;
    }
  }
  conv2d_backward_im2col(din, dweight, dbias, dout, in, weight, g, workspace);
}

#define HT_INSTANTIATE(T)                                                                                    \
  template void conv2d_forward<T>(T*, const T*, const T*, const T*, const Conv2dGeom&, T*);                 \
  template void conv2d_backward<T>(T*, T*, T*, const T*, const T*, const T*, const Conv2dGeom&, T*);        \
  template void conv2d_forward_im2col<T>(T*, const T*, const T*, const T*, const Conv2dGeom&, T*);          \
  template void conv2d_backward_im2col<T>(T*, T*, T*, const T*, const T*, const T*, const Conv2dGeom&, T*);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
