// ops/common/unary_cpu.hpp — the CPU loops of the unary-op helper (ops/common/unary.hpp), for the ops' .cpp
// files: y[i] = F{}(x[i]) and dx[i] = F{}(dy[i], saved[i]) for float and double (double is the reference of
// gradient checks), memory-bound, split over the OpenMP threads only when large enough to pay for waking
// them, each slice a vector clone (AVX-512 or AVX2 where the CPU has it).
#pragma once

#include <cstdint>

#include "ops/common/for_slices.hpp"
#include "ops/common/unary.hpp"
#include "ops/common/vector_clones.hpp"

namespace hetrain::ops {

namespace unary_detail {
template <typename T, typename F>
HT_VECTOR_CLONES void forward_slice(T* y, const T* x, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) y[i] = F{}(x[i]);
}
// dy is passed (so loaded) unconditionally: with the load inside a ?: the compiler keeps a branch per
// element, which mispredicts on random signs and does not vectorise.
template <typename T, typename F>
HT_VECTOR_CLONES void backward_slice(T* dx, const T* dy, const T* saved, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) dx[i] = F{}(dy[i], saved[i]);
}
}  // namespace unary_detail

template <typename F, typename T>
void unary_forward_cpu(T* y, const T* x, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { unary_detail::forward_slice<T, F>(y, x, b, e); });
}
template <typename F, typename T>
void unary_backward_cpu(T* dx, const T* dy, const T* saved, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { unary_detail::backward_slice<T, F>(dx, dy, saved, b, e); });
}

// Fills the CPU slots of UnaryOp `op` with F's loops for float. At namespace scope in the op's .cpp.
#define HT_UNARY_CPU(op, F)                                                                         \
  HT_OP_IMPLEMENTATION((op).forward_impl, ::hetrain::Device::CPU, (::hetrain::ops::unary_forward_cpu<F, float>)); \
  HT_OP_IMPLEMENTATION((op).backward_impl, ::hetrain::Device::CPU, (::hetrain::ops::unary_backward_cpu<F, float>))

}  // namespace hetrain::ops
