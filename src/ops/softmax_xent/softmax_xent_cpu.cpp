// ops/softmax_xent/softmax_xent_cpu.cpp — softmax cross-entropy with label smoothing, and top-1 accuracy.
//
// Per row with m = max z and lse = log Σ exp(z − m):  log p_k = z_k − m − lse, and with the smoothed target
// t = (1−ε)·onehot(y) + ε/K:  loss = −Σ t_k log p_k = lse + m − (1−ε)·z_y − (ε/K)·Σ z_k.
// Subtracting the max keeps exp from overflowing; sums run in double.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu {

namespace {
void check_args(const int32_t* labels, int N, int K, double eps, const char* who) {
  HT_CHECK(N >= 0 && K > 0, who, ": bad sizes N=", N, " K=", K);
  HT_CHECK(eps >= 0 && eps <= 1, who, ": label smoothing must be in [0, 1], got ", eps);
  for (int n = 0; n < N; ++n)
    HT_CHECK(labels[n] >= 0 && labels[n] < K, who, ": label ", labels[n], " of row ", n, " is outside [0, ", K,
             ")");
}
}  // namespace

template <typename T>
T softmax_xent_forward(T* probs, const T* logits, const int32_t* labels, int N, int K, T label_smoothing) {
  check_args(labels, N, K, double(label_smoothing), "softmax_xent_forward");
  if (N == 0) return T(0);
  const double eps = label_smoothing;
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (int64_t(N) * K > (1 << 15))
  for (int n = 0; n < N; ++n) {
    const T* z = logits + int64_t(n) * K;
    T* p = probs + int64_t(n) * K;
    double m = z[0];
    for (int k = 1; k < K; ++k) m = std::max(m, double(z[k]));
    double se = 0, sz = 0;
    for (int k = 0; k < K; ++k) {
      const double e = std::exp(double(z[k]) - m);
      p[k] = T(e);
      se += e;
      sz += z[k];
    }
    const double inv = 1.0 / se;
    for (int k = 0; k < K; ++k) p[k] = T(double(p[k]) * inv);
    // The smoothing term only with smoothing: PyTorch's loss without it never reads the other logits, so a
    // −inf among them leaves it finite (0·−inf would be NaN).
    total += std::log(se) + m - (1.0 - eps) * double(z[labels[n]]) - (eps > 0 ? eps / K * sz : 0.0);
  }
  return T(total / N);
}

template <typename T>
void softmax_xent_backward(T* dlogits, const T* probs, const int32_t* labels, int N, int K, T label_smoothing,
                           T scale) {
  check_args(labels, N, K, double(label_smoothing), "softmax_xent_backward");
  const T off = label_smoothing / T(K), on = T(1) - label_smoothing + off;
#pragma omp parallel for schedule(static) if (int64_t(N) * K > (1 << 15))
  for (int n = 0; n < N; ++n) {
    const T* p = probs + int64_t(n) * K;
    T* d = dlogits + int64_t(n) * K;
    const T at_label = (p[labels[n]] - on) * scale;  // read first: dlogits may be probs itself (in place)
    for (int k = 0; k < K; ++k) d[k] = (p[k] - off) * scale;
    d[labels[n]] = at_label;
  }
}

template <typename T>
int64_t top1_correct(const T* logits, const int32_t* labels, int N, int K) {
  HT_CHECK(N >= 0 && K > 0, "top1_correct: bad sizes N=", N, " K=", K);
  int64_t correct = 0;
  for (int n = 0; n < N; ++n) {
    const T* z = logits + int64_t(n) * K;
    int best = 0;  // first maximum wins ties, and a NaN beats every number, like torch.argmax
    for (int k = 1; k < K; ++k)
      if (z[k] > z[best] || (std::isnan(z[k]) && !std::isnan(z[best]))) best = k;
    correct += best == labels[n];
  }
  return correct;
}

#define HT_INSTANTIATE(T)                                                                       \
  template T softmax_xent_forward<T>(T*, const T*, const int32_t*, int, int, T);                \
  template void softmax_xent_backward<T>(T*, const T*, const int32_t*, int, int, T, T);         \
  template int64_t top1_correct<T>(const T*, const int32_t*, int, int);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
