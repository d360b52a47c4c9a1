// hetrain/threading.hpp — CPU thread count, a runtime option (--threads).
//
// Our own loops use OpenMP; GEMMs use OpenBLAS's pool. set_num_threads sets both so that ranks bound to
// one core each do not fight over cores.
#pragma once

namespace hetrain {
void set_num_threads(int n);  // n >= 1
int num_threads();
}  // namespace hetrain
