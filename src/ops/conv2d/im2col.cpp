// ops/conv2d/im2col.cpp — see im2col.hpp. Both loops walk whole output rows; the valid q range of each
// (r, s, p) is computed once so the inner loop is a branch-free copy (a memcpy-like loop for stride 1).
#include "ops/conv2d/im2col.hpp"

#include <algorithm>

namespace hetrain::ops::cpu::detail {

namespace {
// Output columns q whose input column q·stride − pad + s lies in [0, W): q ∈ [lo, hi).
inline void valid_range(int s, int stride, int pad, int W, int Q, int* lo, int* hi) {
  // smallest q with q·stride ≥ pad − s
  int l = pad - s <= 0 ? 0 : (pad - s + stride - 1) / stride;
  // smallest q with q·stride ≥ W + pad − s
  int h = W + pad - s <= 0 ? 0 : (W + pad - s + stride - 1) / stride;
  *lo = std::min(l, Q);
  *hi = std::max(*lo, std::min(h, Q));
}
}  // namespace

template <typename T>
void im2col(T* col, int64_t ld, const T* in, const Conv2dGeom& g) {
  const int P = g.P(), Q = g.Q(), RS = g.R * g.S;
  const int rows = g.C * RS;
#pragma omp parallel for schedule(static) if (int64_t(rows) * P * Q > (1 << 15))
  for (int row = 0; row < rows; ++row) {
    const int c = row / RS, r = (row / g.S) % g.R, s = row % g.S;
    int lo, hi;
    valid_range(s, g.stride, g.pad, g.W, Q, &lo, &hi);
    const T* plane = in + int64_t(c) * g.H * g.W;
    T* dst = col + int64_t(row) * ld;
    for (int p = 0; p < P; ++p, dst += Q) {
      const int h = p * g.stride - g.pad + r;
      if (h < 0 || h >= g.H) {
        std::fill(dst, dst + Q, T(0));
        continue;
      }
      // src[j] is the input column of output column lo + j
      const T* src = plane + int64_t(h) * g.W + (lo * g.stride - g.pad + s);
      for (int q = 0; q < lo; ++q) dst[q] = T(0);
      T* d = dst + lo;
      const int n = hi - lo;
      if (g.stride == 1) {
        for (int j = 0; j < n; ++j) d[j] = src[j];
      } else {
        for (int j = 0; j < n; ++j) d[j] = src[int64_t(j) * g.stride];
      }
      for (int q = hi; q < Q; ++q) dst[q] = T(0);
    }
  }
}

template <typename T>
void col2im_add(T* in, const T* col, int64_t ld, const Conv2dGeom& g) {
  const int P = g.P(), Q = g.Q();
  // One thread per input channel: rows of different channels never write the same input element.
#pragma omp parallel for schedule(static) if (int64_t(g.C) * g.R * g.S * P * Q > (1 << 15))
  for (int c = 0; c < g.C; ++c) {
    T* plane = in + int64_t(c) * g.H * g.W;
    for (int r = 0; r < g.R; ++r)
      for (int s = 0; s < g.S; ++s) {
        int lo, hi;
        valid_range(s, g.stride, g.pad, g.W, Q, &lo, &hi);
        const T* src = col + int64_t((c * g.R + r) * g.S + s) * ld;
        for (int p = 0; p < P; ++p, src += Q) {
          const int h = p * g.stride - g.pad + r;
          if (h < 0 || h >= g.H) continue;
          T* dst = plane + int64_t(h) * g.W + (lo * g.stride - g.pad + s);
          const T* sv = src + lo;
          const int n = hi - lo;
          if (g.stride == 1) {
            for (int j = 0; j < n; ++j) dst[j] += sv[j];
          } else {
            for (int j = 0; j < n; ++j) dst[int64_t(j) * g.stride] += sv[j];
          }
        }
      }
  }
}

template void im2col<float>(float*, int64_t, const float*, const Conv2dGeom&);
template void im2col<double>(double*, int64_t, const double*, const Conv2dGeom&);
template void col2im_add<float>(float*, const float*, int64_t, const Conv2dGeom&);
template void col2im_add<double>(double*, const double*, int64_t, const Conv2dGeom&);

}  // namespace hetrain::ops::cpu::detail
