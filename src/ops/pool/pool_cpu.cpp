// ops/pool/pool_cpu.cpp — max and average pooling over square windows, and global average pooling.
// One (n, c) plane per OpenMP iteration: planes are independent in forward and backward.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "ops/common/vector_clones.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
// Work (element visits) below which one thread is faster than waking the team.
constexpr int64_t kParallelMin = int64_t(1) << 15;

void check_geom(const Pool2dGeom& g, const char* who) {
  // pad ≤ kernel/2 (PyTorch's rule) guarantees every window overlaps the image.
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.kernel > 0 && g.stride > 0 && g.pad >= 0 &&
               2 * g.pad <= g.kernel && g.P() > 0 && g.Q() > 0,
           who, ": bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " kernel=", g.kernel,
           " stride=", g.stride, " pad=", g.pad);
}

// One plane, one output row at a time: for each input element of the window, a pass over the whole row
// of outputs (a strided load the compiler vectorises), and the running maximum is a select, not a branch.
// Scalar code with a branch per element (random on real activations) made this a fifth of a lenet step.
// A NaN wins over every number, as in PyTorch, and the first NaN of a window is kept (as cuDNN and the host
// emulation's pooling find it again; PyTorch's own kernel sends the gradient to the window's last NaN instead).
template <typename T>
HT_VECTOR_CLONES void maxpool_plane(T* __restrict y, int32_t* __restrict am, const T* __restrict x,
                                    const Pool2dGeom& g, int P, int Q) {
  const int H = g.H, W = g.W, kernel = g.kernel, stride = g.stride, pad = g.pad;  // locals: no reloads
  for (int p = 0; p < P; ++p) {
    T* __restrict best = y + p * Q;
    int32_t* __restrict idx = am + p * Q;
    for (int q = 0; q < Q; ++q) idx[q] = -1;
    const int h0 = std::max(0, p * stride - pad), h1 = std::min(H, p * stride - pad + kernel);
    for (int h = h0; h < h1; ++h)
      for (int s = 0; s < kernel; ++s) {
        // Outputs whose window column w = q·stride − pad + s lies inside the image.
        const int off = s - pad;
        const int q0 = off >= 0 ? 0 : (-off + stride - 1) / stride;
        const int q1 = std::min(Q, (W - 1 - off) / stride + 1);
        const T* __restrict row = x + h * W + off;
        const int32_t base = h * W + off;
#pragma omp simd
        for (int q = q0; q < q1; ++q) {
          const T v = row[q * stride];
          const T b = best[q];
          const int32_t i = idx[q];
          const bool take = (i < 0) | (v > b) | ((v != v) & (b == b));  // bitwise: no branches
          best[q] = take ? v : b;
          idx[q] = take ? base + q * stride : i;
        }
      }
  }
}
}  // namespace

template <typename T>
void maxpool2d_forward(T* out, int32_t* argmax, const T* in, const Pool2dGeom& g) {
  check_geom(g, "maxpool2d_forward");
  const int P = g.P(), Q = g.Q();
  const int64_t planes = int64_t(g.N) * g.C;
#pragma omp parallel for schedule(static) if (planes * P * Q * g.kernel * g.kernel > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl)
    maxpool_plane(out + pl * P * Q, argmax + pl * P * Q, in + pl * g.H * g.W, g, P, Q);
}

template <typename T>
void maxpool2d_backward(T* din, const T* dout, const int32_t* argmax, const Pool2dGeom& g) {
  check_geom(g, "maxpool2d_backward");
  const int PQ = g.P() * g.Q(), HW = g.H * g.W;
  const int64_t planes = int64_t(g.N) * g.C;
#pragma omp parallel for schedule(static) if (planes * HW > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* dx = din + pl * HW;
    for (int j = 0; j < HW; ++j) dx[j] = T(0);
    const T* dy = dout + pl * PQ;
    const int32_t* am = argmax + pl * PQ;
    for (int j = 0; j < PQ; ++j) dx[am[j]] += dy[j];  // overlapping windows may pick the same input
  }
}

template <typename T>
void avgpool2d_forward(T* out, const T* in, const Pool2dGeom& g) {
  check_geom(g, "avgpool2d_forward");
  const int P = g.P(), Q = g.Q();
  const int64_t planes = int64_t(g.N) * g.C;
  const T inv = T(1) / T(g.kernel * g.kernel);  // padding counts as zeros
#pragma omp parallel for schedule(static) if (planes * P * Q * g.kernel * g.kernel > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* x = in + pl * g.H * g.W;
    T* y = out + pl * P * Q;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        T acc = 0;
        for (int r = 0; r < g.kernel; ++r) {
          const int h = p * g.stride - g.pad + r;
          if (h < 0 || h >= g.H) continue;
          for (int s = 0; s < g.kernel; ++s) {
            const int w = q * g.stride - g.pad + s;
            if (w >= 0 && w < g.W) acc += x[h * g.W + w];
          }
        }
        y[p * Q + q] = acc * inv;
      }
  }
}

template <typename T>
void avgpool2d_backward(T* din, const T* dout, const Pool2dGeom& g) {
  check_geom(g, "avgpool2d_backward");
  const int P = g.P(), Q = g.Q(), HW = g.H * g.W;
  const int64_t planes = int64_t(g.N) * g.C;
  const T inv = T(1) / T(g.kernel * g.kernel);
#pragma omp parallel for schedule(static) if (planes * P * Q * g.kernel * g.kernel > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* dx = din + pl * HW;
    for (int j = 0; j < HW; ++j) dx[j] = T(0);
    const T* dy = dout + pl * P * Q;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const T d = dy[p * Q + q] * inv;
        for (int r = 0; r < g.kernel; ++r) {
          const int h = p * g.stride - g.pad + r;
          if (h < 0 || h >= g.H) continue;
          for (int s = 0; s < g.kernel; ++s) {
            const int w = q * g.stride - g.pad + s;
            if (w >= 0 && w < g.W) dx[h * g.W + w] += d;
          }
        }
      }
  }
}

template <typename T>
void global_avgpool_forward(T* out, const T* in, int N, int C, int HW) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "global_avgpool_forward: bad sizes N=", N, " C=", C, " HW=", HW);
  const int64_t planes = int64_t(N) * C;
#pragma omp parallel for schedule(static) if (planes * HW > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* x = in + pl * HW;
    T acc = 0;
    for (int j = 0; j < HW; ++j) acc += x[j];
    out[pl] = acc / T(HW);
  }
}

template <typename T>
void global_avgpool_backward(T* din, const T* dout, int N, int C, int HW) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "global_avgpool_backward: bad sizes N=", N, " C=", C, " HW=", HW);
  const int64_t planes = int64_t(N) * C;
#pragma omp parallel for schedule(static) if (planes * HW > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T d = dout[pl] / T(HW);
    T* dx = din + pl * HW;
    for (int j = 0; j < HW; ++j) dx[j] = d;
  }
}

#define HT_INSTANTIATE(T)                                                               \
  template void maxpool2d_forward<T>(T*, int32_t*, const T*, const Pool2dGeom&);        \
  template void maxpool2d_backward<T>(T*, const T*, const int32_t*, const Pool2dGeom&); \
  template void avgpool2d_forward<T>(T*, const T*, const Pool2dGeom&);                  \
  template void avgpool2d_backward<T>(T*, const T*, const Pool2dGeom&);                 \
  template void global_avgpool_forward<T>(T*, const T*, int, int, int);                 \
  template void global_avgpool_backward<T>(T*, const T*, int, int, int);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
