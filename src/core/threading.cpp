#include "hetrain/threading.hpp"

#include <cblas.h>
#include <omp.h>

#include "hetrain/error.hpp"

namespace hetrain {
void set_num_threads(int n) {
  HT_CHECK(n >= 1, "thread count must be at least 1, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}
int num_threads() { return omp_get_max_threads(); }
}  // namespace hetrain
