// cpu/elementwise.cpp — ReLU, residual add and gradient accumulation: memory-bound loops, OpenMP-split
// only when large enough to pay for waking the threads. Each thread's range runs a vector clone
// (cpu/vector_clones.hpp), so AVX-512 or AVX2 is used where the CPU has it.
#include <algorithm>
#include <cstdint>

#include "cpu/for_slices.hpp"
#include "cpu/vector_clones.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::cpu {

namespace {
template <typename T>
HT_VECTOR_CLONES void relu_slice(T* out, const T* in, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) out[i] = in[i] > T(0) ? in[i] : T(0);
}

// dout is loaded unconditionally: with the load inside the ?: the compiler keeps a branch per element
// (it may not touch dout where out <= 0), which mispredicts on ReLU's random signs and does not vectorise
// — it made this loop ~10% of a ResNet-50 step.
template <typename T>
HT_VECTOR_CLONES void relu_backward_slice(T* din, const T* dout, const T* out, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    const T d = dout[i];
    din[i] = out[i] > T(0) ? d : T(0);
  }
}

template <typename T>
HT_VECTOR_CLONES void add_slice(T* out, const T* a, const T* x, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) out[i] = a[i] + x[i];
}
}  // namespace

template <typename T>
void relu_forward(T* out, const T* in, int64_t n) {
  for_slices(n, [&](int64_t b, int64_t e) { relu_slice(out, in, b, e); });
}

// Uses the forward output: out > 0 exactly where in > 0, and out is what the layer keeps.
template <typename T>
void relu_backward(T* din, const T* dout, const T* out, int64_t n) {
  for_slices(n, [&](int64_t b, int64_t e) { relu_backward_slice(din, dout, out, b, e); });
}

template <typename T>
void add_forward(T* out, const T* a, const T* b, int64_t n) {
  for_slices(n, [&](int64_t s, int64_t e) { add_slice(out, a, b, s, e); });
}

template <typename T>
void accumulate(T* acc, const T* x, int64_t n) {
  for_slices(n, [&](int64_t b, int64_t e) { add_slice(acc, acc, x, b, e); });
}

#define HT_INSTANTIATE(T)                                                 \
  template void relu_forward<T>(T*, const T*, int64_t);                   \
  template void relu_backward<T>(T*, const T*, const T*, int64_t);        \
  template void add_forward<T>(T*, const T*, const T*, int64_t);          \
  template void accumulate<T>(T*, const T*, int64_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::cpu
