// ops/conv2d/conv2d_cpu.cpp — the CPU convolution: which implementation runs (oneDNN when built with it, for float;
// im2col + GEMM otherwise), and the im2col + GEMM (OpenBLAS) implementation itself, forward and backward.
// The oneDNN one is in dnnl/; docs/cpu-performance.md compares them.
//
// Samples are processed in groups of nb: the columns of a group form one [C·R·S, nb·P·Q] matrix, so a
// layer with a small output plane (8×8 in ResNet-20's last stage) still gives GEMMs with ~1000 columns.
// GEMM output of a group is [K, nb·P·Q]; it is scattered to out [nb, K, P, Q] (and dout gathered the
// other way in backward) — a copy that costs 1/(C·R·S) of the GEMM.
//
// Threads: with T > 1 OpenMP threads, the groups are shared out among the threads, each with its own slice
// of the workspace and single-threaded GEMMs (OpenBLAS's OpenMP build runs serially inside a parallel
// region). Splitting one GEMM across threads does not pay on these sizes: a 16×1024×144 GEMM of ResNet-20's
// first stage is done before the threads have synchronised, and im2col/col2im would stay serial. The
// weight gradient is a sum over groups: thread 0 accumulates into dweight, the others into private
// [K, C·R·S] partials added afterwards in thread order (deterministic for a given thread count).
//
// 1×1 stride-1 unpadded convs with planes of ≥ 1024 pixels need no unfolding: the input sample [C, H·W]
// already is the column matrix. Smaller 1×1 planes go the grouped way (their "im2col" is a copy), which
// gives the GEMMs enough columns — ResNet-50's last stage has 7×7 planes.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/conv2d/dnnl_conv.hpp"
#include "ops/common/gemm.hpp"
#include "ops/conv2d/im2col.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
// Columns per group we aim for: enough for OpenBLAS to reach its speed, small enough that the column
// matrix stays in L2/L3 between im2col and the GEMM. Measured on ResNet-20 layers (N=128, 1 thread):
// 1024 beat 4096 by ~15% (the larger column matrix falls out of cache) and beat 256 on 8×8 planes.
constexpr int64_t kTargetColumns = 1024;

int64_t plane(const Conv2dGeom& g) { return int64_t(g.P()) * g.Q(); }

// GEMM straight on the input: 1×1, stride 1, no padding, and a plane large enough on its own.
bool is_direct(const Conv2dGeom& g) {
  return g.R == 1 && g.S == 1 && g.stride == 1 && g.pad == 0 && plane(g) >= kTargetColumns;
}

// Samples per group on one thread: enough for kTargetColumns columns, at most N.
int base_group(const Conv2dGeom& g) {
  const int64_t nb = (kTargetColumns + plane(g) - 1) / plane(g);
  return int(std::max<int64_t>(1, std::min<int64_t>(nb, g.N)));
}

// How the batch is cut: `threads` workers, groups of `nb` samples (the last may be smaller).
struct Plan {
  int threads = 1;
  int nb = 1;
};

int max_threads() { return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads()); }

// With T threads the number of groups is rounded up to a multiple of T (each thread gets the same number
// of groups) by shrinking nb; nb never exceeds base_group, so the workspace bound below holds.
Plan plan_for(const Conv2dGeom& g) {
  Plan p;
  p.nb = base_group(g);
  p.threads = std::min(max_threads(), std::max(g.N, 1));
  if (p.threads > 1) {
    const int groups = (g.N + p.nb - 1) / p.nb;
    const int rounded = (groups + p.threads - 1) / p.threads * p.threads;
    p.nb = (g.N + rounded - 1) / rounded;
  }
  return p;
}

void check_geom(const Conv2dGeom& g, const char* who) {
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.K > 0 && g.R > 0 && g.S > 0 && g.stride > 0 &&
               g.pad >= 0 && g.P() > 0 && g.Q() > 0,
           who, ": bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S,
           " stride=", g.stride, " pad=", g.pad);
  HT_CHECK(int64_t(g.C) * g.R * g.S * g.P() * g.Q() * base_group(g) < (int64_t(1) << 31),
           who, ": column matrix too large for 32-bit BLAS indices");
}

// Per-thread workspace: columns C·R·S × nb·PQ, then K × nb·PQ for the group's GEMM output (nb > 1).
int64_t per_thread_size(const Conv2dGeom& g, int nb) {
  const int64_t cols = int64_t(nb) * plane(g);
  return int64_t(g.C) * g.R * g.S * cols + (nb > 1 ? int64_t(g.K) * cols : 0);
}
}  // namespace

// Direct 1×1: 0. Otherwise, for t = min(threads, N) and nb = min(N, ceil(1024 / (P·Q))):
// t column blocks of C·R·S × nb·P·Q (+ K × nb·P·Q each when nb > 1), plus (t − 1) weight-gradient
// partials of K × C·R·S. Non-decreasing in N for a given thread count.
int64_t conv2d_im2col_workspace_size(const Conv2dGeom& g) {
  check_geom(g, "conv2d_workspace_size");
  if (is_direct(g)) return 0;
  const int t = std::min(max_threads(), std::max(g.N, 1));
  return t * per_thread_size(g, base_group(g)) + int64_t(t - 1) * g.K * g.C * g.R * g.S;
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

// Forward of samples [n0, n0 + m): unfold, one GEMM, scatter to NCHW.
template <typename T>
void forward_group(T* out, const T* in, const T* weight, const Conv2dGeom& g, int n0, int m, T* col, T* tmp) {
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S, ld = m * PQ;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;
  for (int i = 0; i < m; ++i) detail::im2col(col + int64_t(i) * PQ, ld, in + (n0 + i) * in_stride, g);
  if (m == 1) {  // out_n [K, PQ] = W [K, CRS] · col [CRS, PQ]
    detail::gemm(false, false, g.K, PQ, CRS, T(1), weight, CRS, col, ld, T(0), out + n0 * out_stride, PQ);
    return;
  }
  detail::gemm(false, false, g.K, ld, CRS, T(1), weight, CRS, col, ld, T(0), tmp, ld);
  // tmp [K, m, PQ] → out [m, K, PQ]
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < g.K; ++k)
      std::memcpy(out + (n0 + i) * out_stride + int64_t(k) * PQ, tmp + int64_t(k) * ld + int64_t(i) * PQ,
                  sizeof(T) * PQ);
}

// Backward of samples [n0, n0 + m): dweight_acc += dout_g · colᵀ; din of the group overwritten.
template <typename T>
void backward_group(T* din, T* dweight_acc, const T* dout, const T* in, const T* weight, const Conv2dGeom& g,
                    int n0, int m, T* col, T* dtmp) {
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S, ld = m * PQ;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;
  // The group's dout as one [K, m·PQ] matrix (dout itself when m = 1).
  const T* dg = dout + n0 * out_stride;
  if (m > 1) {
    for (int i = 0; i < m; ++i)
      for (int k = 0; k < g.K; ++k)
        std::memcpy(dtmp + int64_t(k) * ld + int64_t(i) * PQ, dout + (n0 + i) * out_stride + int64_t(k) * PQ,
                    sizeof(T) * PQ);
    dg = dtmp;
  }
  if (dweight_acc) {  // dW [K, CRS] += dout_g [K, m·PQ] · colᵀ [m·PQ, CRS]
    for (int i = 0; i < m; ++i) detail::im2col(col + int64_t(i) * PQ, ld, in + (n0 + i) * in_stride, g);
    detail::gemm(false, true, g.K, CRS, ld, T(1), dg, ld, col, ld, T(1), dweight_acc, CRS);
  }
  if (din) {  // dcol [CRS, m·PQ] = Wᵀ [CRS, K] · dout_g [K, m·PQ], folded back into din (col reused)
    detail::gemm(true, false, CRS, ld, g.K, T(1), weight, CRS, dg, ld, T(0), col, ld);
    T* dg_in = din + n0 * in_stride;
    std::fill(dg_in, dg_in + m * in_stride, T(0));
    for (int i = 0; i < m; ++i) detail::col2im_add(dg_in + i * in_stride, col + int64_t(i) * PQ, ld, g);
  }
}

}  // namespace

template <typename T>
void conv2d_forward_im2col(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g,
                           T* workspace) {
  check_geom(g, "conv2d_forward");
  const int PQ = g.P() * g.Q();
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;

  if (g.N == 0) return;
  if (is_direct(g)) {
    // out_n [K, HW] = W [K, C] · in_n [C, HW]; samples shared out among the threads.
    const int t = std::min(max_threads(), g.N);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (int n = 0; n < g.N; ++n)
      detail::gemm(false, false, g.K, PQ, g.C, T(1), weight, g.C, in + n * in_stride, PQ, T(0),
                   out + n * out_stride, PQ);
  } else {
    HT_CHECK(workspace != nullptr, "conv2d_forward: workspace is null");
    const Plan p = plan_for(g);
    const int64_t slice = per_thread_size(g, p.nb), col_size = int64_t(g.C) * g.R * g.S * p.nb * PQ;
    const int groups = (g.N + p.nb - 1) / p.nb;
#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      T* col = workspace + t * slice;
      for (int gi = t; gi < groups; gi += nt) {
        const int n0 = gi * p.nb;
        forward_group(out, in, weight, g, n0, std::min(p.nb, g.N - n0), col, col + col_size);
      }
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
    const int t = std::min(max_threads(), g.N);
    // dW [K, C] += Σ_n dout_n [K, HW] · in_nᵀ [HW, C]: each thread owns a band of rows of dW and runs over
    // all samples in order, so no partial sums are needed (and the bits do not depend on the thread count).
    if (dweight) {
      const int bands = std::min(t, g.K);
#pragma omp parallel num_threads(bands) if (bands > 1)
      {
        const int b = omp_get_thread_num(), nbnd = omp_get_num_threads();
        const int k0 = int(int64_t(g.K) * b / nbnd), k1 = int(int64_t(g.K) * (b + 1) / nbnd);
        for (int n = 0; n < g.N; ++n)
          detail::gemm(false, true, k1 - k0, g.C, PQ, T(1), dout + n * out_stride + int64_t(k0) * PQ, PQ,
                       in + n * in_stride, PQ, T(1), dweight + int64_t(k0) * g.C, g.C);
      }
    }
    // din_n [C, HW] = Wᵀ [C, K] · dout_n [K, HW]
    if (din) {
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
      for (int n = 0; n < g.N; ++n)
        detail::gemm(true, false, g.C, PQ, g.K, T(1), weight, g.C, dout + n * out_stride, PQ, T(0),
                     din + n * in_stride, PQ);
    }
    return;
  }

  HT_CHECK(workspace != nullptr, "conv2d_backward: workspace is null");
  const Plan p = plan_for(g);
  const int64_t slice = per_thread_size(g, p.nb), col_size = int64_t(CRS) * p.nb * PQ;
  const int64_t wsize = int64_t(g.K) * CRS;
  T* partials = workspace + p.threads * slice;  // (threads − 1) × [K, CRS]
  const int groups = (g.N + p.nb - 1) / p.nb;
#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    T* col = workspace + t * slice;
    T* acc = dweight;
    if (dweight && t > 0) {
      acc = partials + (t - 1) * wsize;
      std::fill(acc, acc + wsize, T(0));
    }
    for (int gi = t; gi < groups; gi += nt) {
      const int n0 = gi * p.nb;
      backward_group(din, acc, dout, in, weight, g, n0, std::min(p.nb, g.N - n0), col, col + col_size);
    }
    if (dweight && nt > 1) {
#pragma omp barrier
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
