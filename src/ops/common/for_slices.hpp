// ops/common/for_slices.hpp — splitting a memory-bound loop over the OpenMP threads (internal to the CPU ops).
#pragma once

#include <omp.h>

#include <cstdint>

namespace hetrain::ops::cpu {

// Below this many elements waking the threads costs more than the loop.
constexpr int64_t kSliceParallelMin = int64_t(1) << 16;

// Calls kernel(begin, end) on contiguous slices of [0, n), one per thread when n is large enough; serial
// inside another parallel region.
template <typename Kernel>
void for_slices(int64_t n, Kernel kernel) {
  if (n <= kSliceParallelMin || omp_in_parallel() || omp_get_max_threads() == 1) {
    kernel(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    kernel(n * t / nt, n * (t + 1) / nt);
  }
}

}  // namespace hetrain::ops::cpu
