// ops/linear/linear_cpu.cpp — fully connected layer through GEMM.
//
// A sample's output must not depend on how many samples share its batch: the balancer changes every
// rank's batch size, and any split must match one process up to the reduction's reassociation (invariant
// 1 of docs/architecture.md; test/e2e/checkpoint_resume.sh compares 4 ranks with 1). oneDNN's GEMM picks
// its kernels and their summation order by the matrix shape, so out = in · Wᵀ for 8 rows differed in the
// last bit from the same rows inside 32 (3389 of 3840 values), and training amplified that to 2e-4. The
// per-sample products therefore run on blocks of exactly kRows rows; a last, shorter block is padded.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/common/gemm.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
constexpr int kRows = 16;

// C [N, cols] = A [N, inner] · op(B) for each block of kRows rows of A, op(B) = B [inner, cols] or its
// transpose when b_trans (B is then [cols, inner]).
template <typename T>
void per_row_gemm(int N, int cols, int inner, const T* A, const T* B, bool b_trans, T* C) {
  const int ldb = b_trans ? inner : cols;
  int n = 0;
  for (; n + kRows <= N; n += kRows)
    detail::gemm(false, b_trans, kRows, cols, inner, T(1), A + int64_t(n) * inner, inner, B, ldb, T(0),
                 C + int64_t(n) * cols, cols);
  if (n == N) return;
  const int rest = N - n;
  // Kept between calls: the tail runs in every layer of every step.
  thread_local std::vector<T> a, c;
  a.assign(size_t(kRows) * inner, T(0));
  c.resize(size_t(kRows) * cols);
  std::memcpy(a.data(), A + int64_t(n) * inner, sizeof(T) * size_t(rest) * inner);
  detail::gemm(false, b_trans, kRows, cols, inner, T(1), a.data(), inner, B, ldb, T(0), c.data(), cols);
  std::memcpy(C + int64_t(n) * cols, c.data(), sizeof(T) * size_t(rest) * cols);
}
}  // namespace

// out [N, O] = in [N, I] · weight [O, I]ᵀ + bias [O]
template <typename T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, int N, int I, int O) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, "linear_forward: bad sizes N=", N, " I=", I, " O=", O);
  per_row_gemm(N, O, I, in, weight, /*b_trans=*/true, out);
  if (bias)
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) out[int64_t(n) * O + o] += bias[o];
}

template <typename T>
void linear_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight, int N, int I,
                     int O) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, "linear_backward: bad sizes N=", N, " I=", I, " O=", O);
  // din [N, I] = dout [N, O] · weight [O, I]
  if (din) per_row_gemm(N, I, O, dout, weight, /*b_trans=*/false, din);
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

}  // namespace hetrain::ops::cpu
