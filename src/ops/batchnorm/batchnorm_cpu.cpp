// ops/batchnorm/batchnorm_cpu.cpp — batch normalisation per channel over N·HW values: training, eval, backward.
//
// Statistics are accumulated in double with two passes (mean, then Σ(x − mean)²): with float inputs of
// large mean the one-pass E[x²] − E[x]² loses all digits. One thread per channel; the sums are SIMD
// reductions (several partial sums per channel: a serial double add chain was the bottleneck). The loops
// over one [HW] plane are vector clones (ops/common/vector_clones.hpp): AVX-512 or AVX2 where the CPU has them.
#include <cmath>
#include <cstdint>

#include "ops/common/vector_clones.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
void check_sizes(int N, int C, int HW, const char* who) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, who, ": bad sizes N=", N, " C=", C, " HW=", HW);
}

// Kernels over one plane of HW values.
template <typename T>
HT_VECTOR_CLONES double plane_sum(const T* x, int HW) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < HW; ++j) sum += x[j];
  return sum;
}

template <typename T>
HT_VECTOR_CLONES double plane_squared_deviation(const T* x, int HW, double mean) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int j = 0; j < HW; ++j) {
    const double d = double(x[j]) - mean;
    ss += d * d;
  }
  return ss;
}

// y = (x − mu)·a + b
template <typename T>
HT_VECTOR_CLONES void plane_normalise(T* y, const T* x, int HW, T mu, T a, T b) {
#pragma omp simd
  for (int j = 0; j < HW; ++j) y[j] = (x[j] - mu) * a + b;
}

// sdy += Σ dy, sdyx += Σ dy·(x − mean)
template <typename T>
HT_VECTOR_CLONES void plane_backward_sums(const T* x, const T* dy, int HW, double mean, double* sdy_io,
                                          double* sdyx_io) {
  double sdy = 0, sdyx = 0;
#pragma omp simd reduction(+ : sdy, sdyx)
  for (int j = 0; j < HW; ++j) {
    sdy += dy[j];
    sdyx += double(dy[j]) * (double(x[j]) - mean);
  }
  *sdy_io += sdy;
  *sdyx_io += sdyx;
}

// dx = dy·k + (x − mu)·u + v
template <typename T>
HT_VECTOR_CLONES void plane_backward_dx(T* dx, const T* dy, const T* x, int HW, T k, T u, T v, T mu) {
#pragma omp simd
  for (int j = 0; j < HW; ++j) dx[j] = dy[j] * k + (x[j] - mu) * u + v;
}
}  // namespace

template <typename T>
void batchnorm_forward_train(T* out, T* save_mean, T* save_invstd, T* running_mean, T* running_var, const T* in,
                             const T* gamma, const T* beta, int N, int C, int HW, T momentum, T eps) {
  check_sizes(N, C, HW, "batchnorm_forward_train");
  const int64_t M = int64_t(N) * HW;
  if (N == 0) return;  // a rank with no samples this step: nothing to normalise, running stats untouched
  HT_CHECK(M > 1, "batchnorm_forward_train: need more than 1 value per channel in training, got N=", N,
           " HW=", HW);
  const int64_t cstride = int64_t(C) * HW;
#pragma omp parallel for schedule(static) if (M * C > (1 << 15))
  for (int c = 0; c < C; ++c) {
    double sum = 0;
    for (int n = 0; n < N; ++n) sum += plane_sum(in + n * cstride + int64_t(c) * HW, HW);
    const double mean = sum / double(M);
    double ss = 0;
    for (int n = 0; n < N; ++n) ss += plane_squared_deviation(in + n * cstride + int64_t(c) * HW, HW, mean);
    const double var = ss / double(M);  // biased: what normalisation uses
    const double invstd = 1.0 / std::sqrt(var + double(eps));
    save_mean[c] = T(mean);
    save_invstd[c] = T(invstd);
    if (running_mean) running_mean[c] = T((1.0 - momentum) * running_mean[c] + momentum * mean);
    if (running_var) running_var[c] = T((1.0 - momentum) * running_var[c] + momentum * ss / double(M - 1));
    // out = (x − mean)·a + β with a = γ·invstd (subtracting first keeps digits when |mean| ≫ std)
    const T a = T(double(gamma ? gamma[c] : T(1)) * invstd), b = beta ? beta[c] : T(0), mu = T(mean);
    for (int n = 0; n < N; ++n) {
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_normalise(out + at, in + at, HW, mu, a, b);
    }
  }
}

template <typename T>
void batchnorm_forward_eval(T* out, const T* in, const T* gamma, const T* beta, const T* running_mean,
                            const T* running_var, int N, int C, int HW, T eps) {
  check_sizes(N, C, HW, "batchnorm_forward_eval");
  const int64_t cstride = int64_t(C) * HW;
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(N) * cstride > (1 << 15))
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      const double invstd = 1.0 / std::sqrt(double(running_var[c]) + double(eps));
      const T a = T(double(gamma ? gamma[c] : T(1)) * invstd), b = beta ? beta[c] : T(0), mu = running_mean[c];
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_normalise(out + at, in + at, HW, mu, a, b);
    }
}

// With x̂ = (x − mean)·invstd and y = γ·x̂ + β over M values of a channel:
//   dβ = Σ dy,  dγ = Σ dy·x̂,  dx = γ·invstd/M · (M·dy − dβ − x̂·dγ)   (dβ, dγ of this call only)
template <typename T>
void batchnorm_backward(T* din, T* dgamma, T* dbeta, const T* dout, const T* in, const T* gamma,
                        const T* save_mean, const T* save_invstd, int N, int C, int HW) {
  check_sizes(N, C, HW, "batchnorm_backward");
  if (N == 0) return;
  const int64_t M = int64_t(N) * HW, cstride = int64_t(C) * HW;
#pragma omp parallel for schedule(static) if (M * C > (1 << 15))
  for (int c = 0; c < C; ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    double sdy = 0, sdyx = 0;
    for (int n = 0; n < N; ++n) {
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_backward_sums(in + at, dout + at, HW, mean, &sdy, &sdyx);
    }
    const double dgam = sdyx * invstd;  // Σ dy·x̂
    if (dbeta) dbeta[c] += T(sdy);
    if (dgamma) dgamma[c] += T(dgam);
    if (!din) continue;
    // dx = k·(dy − sdy/M − x̂·dgam/M) = dy·k + (x − mean)·u + v
    const double k = double(gamma ? gamma[c] : T(1)) * invstd;
    const double u = -k * invstd * dgam / double(M);
    const double v = -k * sdy / double(M);
    const T kk = T(k), uu = T(u), vv = T(v), mu = T(mean);
    for (int n = 0; n < N; ++n) {
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_backward_dx(din + at, dout + at, in + at, HW, kk, uu, vv, mu);
    }
  }
}

template <typename T>
void batchnorm_stat_sums(double* sums, const T* in, const T* shift, int N, int C, int HW) {
  check_sizes(N, C, HW, "batchnorm_stat_sums");
  const int64_t cstride = int64_t(C) * HW;
#pragma omp parallel for schedule(static) if (int64_t(N) * cstride > (1 << 15))
  for (int c = 0; c < C; ++c) {
    const double k = shift[c];
    double sum = 0, ss = 0;
    for (int n = 0; n < N; ++n) {
      const T* plane = in + n * cstride + int64_t(c) * HW;
      sum += plane_sum(plane, HW) - k * HW;
      ss += plane_squared_deviation(plane, HW, k);
    }
    sums[c] = sum;
    sums[C + c] = ss;
  }
}

template <typename T>
void batchnorm_grad_sums(double* sums, const T* dout, const T* in, const T* mean, const T* invstd, int N, int C,
                         int HW) {
  check_sizes(N, C, HW, "batchnorm_grad_sums");
  const int64_t cstride = int64_t(C) * HW;
#pragma omp parallel for schedule(static) if (int64_t(N) * cstride > (1 << 15))
  for (int c = 0; c < C; ++c) {
    double sdy = 0, sdyx = 0;
    for (int n = 0; n < N; ++n) {
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_backward_sums(in + at, dout + at, HW, double(mean[c]), &sdy, &sdyx);
    }
    sums[c] = sdy;
    sums[C + c] = sdyx * double(invstd[c]);
  }
}

template <typename T>
void batchnorm_backward_given(T* din, const T* dout, const T* in, const T* gamma, const T* mean, const T* invstd,
                              const T* mean_dy, const T* mean_dy_xhat, int N, int C, int HW) {
  check_sizes(N, C, HW, "batchnorm_backward_given");
  const int64_t cstride = int64_t(C) * HW;
#pragma omp parallel for collapse(2) schedule(static) if (int64_t(N) * cstride > (1 << 15))
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      // dx = k·(dy − mean_dy − x̂·mean_dy_xhat) = dy·k + (x − mean)·u + v, as batchnorm_backward writes it
      const double k = double(gamma ? gamma[c] : T(1)) * double(invstd[c]);
      const T kk = T(k), uu = T(-k * double(invstd[c]) * double(mean_dy_xhat[c])), vv = T(-k * double(mean_dy[c]));
      const int64_t at = n * cstride + int64_t(c) * HW;
      plane_backward_dx(din + at, dout + at, in + at, HW, kk, uu, vv, mean[c]);
    }
}

#define HT_INSTANTIATE(T)                                                                                     \
  template void batchnorm_forward_train<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, int, int, int, T, \
                                           T);                                                               \
  template void batchnorm_forward_eval<T>(T*, const T*, const T*, const T*, const T*, const T*, int, int, int, \
                                          T);                                                                \
  template void batchnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int, int, \
                                      int);                                                                   \
  template void batchnorm_stat_sums<T>(double*, const T*, const T*, int, int, int);                          \
  template void batchnorm_grad_sums<T>(double*, const T*, const T*, const T*, const T*, int, int, int);      \
  template void batchnorm_backward_given<T>(T*, const T*, const T*, const T*, const T*, const T*, const T*,  \
                                            const T*, int, int, int);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
