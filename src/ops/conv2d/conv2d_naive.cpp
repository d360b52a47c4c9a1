// ops/conv2d/conv2d_naive.cpp — direct 7-loop convolution: the test reference for conv2d_cpu.cpp. Slow on purpose;
// accumulates in double so the reference is more accurate than the op under test.
#include <cstdint>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
void check_geom(const Conv2dGeom& g) {
  HT_CHECK(g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.K > 0 && g.R > 0 && g.S > 0 && g.stride > 0 &&
               g.pad >= 0 && g.P() > 0 && g.Q() > 0,
           "conv2d_naive: bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K, " R=", g.R,
           " S=", g.S, " stride=", g.stride, " pad=", g.pad);
}
}  // namespace

template <typename T>
void conv2d_forward_naive(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g) {
  check_geom(g);
  const int P = g.P(), Q = g.Q();
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          double acc = bias ? double(bias[k]) : 0.0;
          for (int c = 0; c < g.C; ++c)
            for (int r = 0; r < g.R; ++r)
              for (int s = 0; s < g.S; ++s) {
                const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
                if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                acc += double(in[((int64_t(n) * g.C + c) * g.H + h) * g.W + w]) *
                       double(weight[((int64_t(k) * g.C + c) * g.R + r) * g.S + s]);
              }
          out[((int64_t(n) * g.K + k) * P + p) * Q + q] = T(acc);
        }
}

template <typename T>
void conv2d_backward_naive(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                           const Conv2dGeom& g) {
  check_geom(g);
  const int P = g.P(), Q = g.Q();
  if (din)
    for (int64_t i = 0; i < int64_t(g.N) * g.C * g.H * g.W; ++i) din[i] = T(0);
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const T d = dout[((int64_t(n) * g.K + k) * P + p) * Q + q];
          if (dbias) dbias[k] += d;
          for (int c = 0; c < g.C; ++c)
            for (int r = 0; r < g.R; ++r)
              for (int s = 0; s < g.S; ++s) {
                const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
                if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                const int64_t ii = ((int64_t(n) * g.C + c) * g.H + h) * g.W + w;
                const int64_t wi = ((int64_t(k) * g.C + c) * g.R + r) * g.S + s;
                if (dweight) dweight[wi] += d * in[ii];
                if (din) din[ii] += d * weight[wi];
              }
        }
}

#define HT_INSTANTIATE(T)                                                                                     \
  template void conv2d_forward_naive<T>(T*, const T*, const T*, const T*, const Conv2dGeom&);               \
  template void conv2d_backward_naive<T>(T*, T*, T*, const T*, const T*, const T*, const Conv2dGeom&);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
