// cpu/conv2d.cpp — convolution as im2col + GEMM (OpenBLAS), forward and backward.
//
// Samples are processed in groups of nb: the columns of a group form one [C·R·S, nb·P·Q] matrix, so a
// layer with a small output plane (8×8 in ResNet-20's last stage) still gives GEMMs with ~1000 columns. GEMM output of a group is [K, nb·P·Q]; it is scattered to out [nb, K, P, Q] (and dout gathered
// the other way in backward) — a copy that costs 1/(C·R·S) of the GEMM.
// 1×1 stride-1 unpadded convs need no unfolding: the input sample [C, H·W] already is the column matrix.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/gemm.hpp"
#include "cpu/im2col.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::cpu {

namespace {
// Columns per group we aim for: enough for OpenBLAS to reach its speed, small enough that the column
// matrix stays in L2/L3 between im2col and the GEMM. Measured on ResNet-20 layers (N=128, 1 thread):
// 1024 beat 4096 by ~15% (the larger column matrix falls out of cache) and beat 256 on 8×8 planes.
constexpr int64_t kTargetColumns = 1024;

bool is_pointwise(const Conv2dGeom& g) { return g.R == 1 && g.S == 1 && g.stride == 1 && g.pad == 0; }

int group_size(const Conv2dGeom& g) {
  const int64_t pq = int64_t(g.P()) * g.Q();
  const int64_t nb = (kTargetColumns + pq - 1) / pq;
  return int(std::max<int64_t>(1, std::min<int64_t>(nb, g.N)));
}

void check_geom(const Conv2dGeom& g, const char* who) {
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.K > 0 && g.R > 0 && g.S > 0 && g.stride > 0 &&
               g.pad >= 0 && g.P() > 0 && g.Q() > 0,
           who, ": bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K, " R=", g.R, " S=", g.S,
           " stride=", g.stride, " pad=", g.pad);
  HT_CHECK(int64_t(g.C) * g.R * g.S * g.P() * g.Q() * group_size(g) < (int64_t(1) << 31),
           who, ": column matrix too large for 32-bit BLAS indices");
}
}  // namespace

// Pointwise: 0. Otherwise columns of one group, C·R·S × nb·P·Q, plus (when nb > 1) the group's GEMM
// output / gathered dout, K × nb·P·Q, where nb = min(N, ceil(1024 / (P·Q))). Non-decreasing in N, so a
// buffer sized for the largest batch serves every smaller one.
int64_t conv2d_workspace_size(const Conv2dGeom& g) {
  check_geom(g, "conv2d_workspace_size");
  if (is_pointwise(g)) return 0;
  const int64_t nb = group_size(g), cols = nb * g.P() * g.Q();
  return int64_t(g.C) * g.R * g.S * cols + (nb > 1 ? int64_t(g.K) * cols : 0);
}

template <typename T>
void conv2d_forward(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g, T* workspace) {
  check_geom(g, "conv2d_forward");
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;

  if (is_pointwise(g)) {
    for (int n = 0; n < g.N; ++n)  // out_n [K, HW] = W [K, C] · in_n [C, HW]
      detail::gemm(false, false, g.K, PQ, g.C, T(1), weight, g.C, in + n * in_stride, PQ, T(0),
                   out + n * out_stride, PQ);
  } else {
    HT_CHECK(workspace != nullptr || g.N == 0, "conv2d_forward: workspace is null");
    const int nb = group_size(g);
    T* col = workspace;
    T* tmp = workspace + int64_t(CRS) * nb * PQ;
    for (int n0 = 0; n0 < g.N; n0 += nb) {
      const int m = std::min(nb, g.N - n0);
      const int ld = m * PQ;
      for (int i = 0; i < m; ++i) detail::im2col(col + int64_t(i) * PQ, ld, in + (n0 + i) * in_stride, g);
      if (m == 1) {  // out_n [K, PQ] = W [K, CRS] · col [CRS, PQ]
        detail::gemm(false, false, g.K, PQ, CRS, T(1), weight, CRS, col, ld, T(0), out + n0 * out_stride, PQ);
        continue;
      }
      detail::gemm(false, false, g.K, ld, CRS, T(1), weight, CRS, col, ld, T(0), tmp, ld);
      // tmp [K, m, PQ] → out [m, K, PQ]
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(g.K) * ld > (1 << 15))
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < g.K; ++k)
          std::memcpy(out + (n0 + i) * out_stride + int64_t(k) * PQ, tmp + int64_t(k) * ld + int64_t(i) * PQ,
                      sizeof(T) * PQ);
    }
  }
  if (bias) {
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(g.N) * out_stride > (1 << 15))
    for (int n = 0; n < g.N; ++n)
      for (int k = 0; k < g.K; ++k) {
        T* o = out + n * out_stride + int64_t(k) * PQ;
        const T b = bias[k];
        for (int j = 0; j < PQ; ++j) o[j] += b;
      }
  }
}

template <typename T>
void conv2d_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                     const Conv2dGeom& g, T* workspace) {
  check_geom(g, "conv2d_backward");
  const int PQ = g.P() * g.Q(), CRS = g.C * g.R * g.S;
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * PQ;

  if (dbias) {  // dbias[k] += Σ_n Σ_pq dout[n, k, pq]
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
  if (!din && !dweight) return;

  if (is_pointwise(g)) {
    for (int n = 0; n < g.N; ++n) {
      const T* dn = dout + n * out_stride;
      const T* xn = in + n * in_stride;
      // dW [K, C] += dout_n [K, HW] · in_nᵀ [HW, C]
      if (dweight) detail::gemm(false, true, g.K, g.C, PQ, T(1), dn, PQ, xn, PQ, T(1), dweight, g.C);
      // din_n [C, HW] = Wᵀ [C, K] · dout_n [K, HW]
      if (din) detail::gemm(true, false, g.C, PQ, g.K, T(1), weight, g.C, dn, PQ, T(0), din + n * in_stride, PQ);
    }
    return;
  }

  HT_CHECK(workspace != nullptr || g.N == 0, "conv2d_backward: workspace is null");
  const int nb = group_size(g);
  T* col = workspace;
  T* dtmp = workspace + int64_t(CRS) * nb * PQ;
  for (int n0 = 0; n0 < g.N; n0 += nb) {
    const int m = std::min(nb, g.N - n0);
    const int ld = m * PQ;
    // The group's dout as one [K, m·PQ] matrix (dout itself when m = 1).
    const T* dg = dout + n0 * out_stride;
    if (m > 1) {
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(g.K) * ld > (1 << 15))
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < g.K; ++k)
          std::memcpy(dtmp + int64_t(k) * ld + int64_t(i) * PQ, dout + (n0 + i) * out_stride + int64_t(k) * PQ,
                      sizeof(T) * PQ);
      dg = dtmp;
    }
    if (dweight) {  // dW [K, CRS] += dout_g [K, m·PQ] · colᵀ [m·PQ, CRS]
      for (int i = 0; i < m; ++i) detail::im2col(col + int64_t(i) * PQ, ld, in + (n0 + i) * in_stride, g);
      detail::gemm(false, true, g.K, CRS, ld, T(1), dg, ld, col, ld, T(1), dweight, CRS);
    }
    if (din) {  // dcol [CRS, m·PQ] = Wᵀ [CRS, K] · dout_g [K, m·PQ], folded back into din (col reused)
      detail::gemm(true, false, CRS, ld, g.K, T(1), weight, CRS, dg, ld, T(0), col, ld);
      T* dg_in = din + n0 * in_stride;
      std::fill(dg_in, dg_in + m * in_stride, T(0));
      for (int i = 0; i < m; ++i) detail::col2im_add(dg_in + i * in_stride, col + int64_t(i) * PQ, ld, g);
    }
  }
}

#define HT_INSTANTIATE(T)                                                                                 \
  template void conv2d_forward<T>(T*, const T*, const T*, const T*, const Conv2dGeom&, T*);              \
  template void conv2d_backward<T>(T*, T*, T*, const T*, const T*, const T*, const Conv2dGeom&, T*);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::cpu
