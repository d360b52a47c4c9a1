// cpu/linear.cpp — fully connected layer through GEMM.
#include <cstdint>

#include "cpu/gemm.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::cpu {

// out [N, O] = in [N, I] · weight [O, I]ᵀ + bias [O]
template <typename T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, int N, int I, int O) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, "linear_forward: bad sizes N=", N, " I=", I, " O=", O);
  detail::gemm(false, true, N, O, I, T(1), in, I, weight, I, T(0), out, O);
  if (bias)
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) out[int64_t(n) * O + o] += bias[o];
}

template <typename T>
void linear_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight, int N, int I,
                     int O) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, "linear_backward: bad sizes N=", N, " I=", I, " O=", O);
  // din [N, I] = dout [N, O] · weight [O, I]
  if (din) detail::gemm(false, false, N, I, O, T(1), dout, O, weight, I, T(0), din, I);
  // dweight [O, I] += doutᵀ [O, N] · in [N, I]
  if (dweight) detail::gemm(true, false, O, I, N, T(1), dout, O, in, I, T(1), dweight, I);
  if (dbias)
    for (int o = 0; o < O; ++o) {
      T acc = 0;
      for (int n = 0; n < N; ++n) acc += dout[int64_t(n) * O + o];
      dbias[o] += acc;
    }
}

#define HT_INSTANTIATE(T)                                                                  \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int);       \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::cpu
