// ops/add/add_cpu.cpp — the residual add and gradient accumulation on the CPU (cpu::add_forward,
// cpu::accumulate of hetrain/ops.hpp): memory-bound loops, OpenMP-split only when large enough to pay for
// waking the threads. Each thread's range runs a vector clone (ops/common/vector_clones.hpp), so AVX-512 or
// AVX2 is used where the CPU has it.
#include <algorithm>
#include <cstdint>

#include "hetrain/ops.hpp"
#include "ops/common/for_slices.hpp"
#include "ops/common/vector_clones.hpp"

namespace hetrain::ops::cpu {

namespace {
template <typename T>
HT_VECTOR_CLONES void add_slice(T* out, const T* a, const T* x, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) out[i] = a[i] + x[i];
}
}  // namespace

template <typename T>
void add_forward(T* out, const T* a, const T* b, int64_t n) {
  for_slices(n, [&](int64_t s, int64_t e) { add_slice(out, a, b, s, e); });
}

template <typename T>
void accumulate(T* acc, const T* x, int64_t n) {
  for_slices(n, [&](int64_t b, int64_t e) { add_slice(acc, acc, x, b, e); });
}

#define HT_INSTANTIATE(T)                                                 \
  template void add_forward<T>(T*, const T*, const T*, int64_t);          \
  template void accumulate<T>(T*, const T*, int64_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops::cpu
