// cpu/pool2d.cpp — max and average pooling over square windows, and global average pooling.
// One (n, c) plane per OpenMP iteration: planes are independent in forward and backward.
#include <cstdint>
#include <limits>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::cpu {

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
}  // namespace

template <typename T>
void maxpool2d_forward(T* out, int32_t* argmax, const T* in, const Pool2dGeom& g) {
  check_geom(g, "maxpool2d_forward");
  const int P = g.P(), Q = g.Q();
  const int64_t planes = int64_t(g.N) * g.C;
#pragma omp parallel for schedule(static) if (planes * P * Q * g.kernel * g.kernel > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* x = in + pl * g.H * g.W;
    T* y = out + pl * P * Q;
    int32_t* am = argmax + pl * P * Q;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        T best = -std::numeric_limits<T>::infinity();
        int32_t idx = -1;
        for (int r = 0; r < g.kernel; ++r) {
          const int h = p * g.stride - g.pad + r;
          if (h < 0 || h >= g.H) continue;
          for (int s = 0; s < g.kernel; ++s) {
            const int w = q * g.stride - g.pad + s;
            if (w < 0 || w >= g.W) continue;
            const T v = x[h * g.W + w];
            if (idx < 0 || v > best || v != v) {  // first element, larger, or NaN (propagates like PyTorch)
              best = v;
              idx = h * g.W + w;
              if (v != v) break;
            }
          }
        }
        y[p * Q + q] = best;
        am[p * Q + q] = idx;
      }
  }
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

}  // namespace hetrain::cpu
