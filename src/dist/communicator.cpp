// Gradient reduction: weighted scaling + MPI sum-allreduce in chunks.
#include "hetrain/dist/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "hetrain/error.hpp"

namespace hetrain::dist {

Communicator::~Communicator() = default;

void Communicator::weighted_allreduce(float* grads, int64_t n, double weight) {
  HT_CHECK(weight >= 0.0 && weight <= 1.0, "weighted_allreduce: weight ", weight, " outside [0, 1]");
  if (weight == 0.0) {
    std::fill(grads, grads + n, 0.0f);  // b_r = 0: contribute nothing, whatever the buffer holds
  } else if (weight != 1.0) {
    const float w = float(weight);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) grads[i] *= w;
  }
  allreduce_sum(grads, n);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int64_t max_chunk, bool polite_wait)
    : comm_(comm),
      max_chunk_(max_chunk > 0 ? std::min<int64_t>(max_chunk, INT_MAX) : INT_MAX),
      polite_wait_(polite_wait) {}

bool node_oversubscribed(int local_ranks) {
  return local_ranks > int(std::max(1u, std::thread::hardware_concurrency()));
}

// MPI libraries spin while they wait. When ranks outnumber cores, a rank that finished its share early
// would burn the core a slower rank needs; sleeping briefly between tests hands it over.
static void wait_politely(MPI_Request* request) {
  int done = 0;
  HT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
  while (!done) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    HT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
  }
}

void MpiCommunicator::allreduce_sum(float* data, int64_t n) {
  HT_CHECK(n >= 0, "allreduce_sum: negative length ", n);
  if (n == 0) return;  // every rank has n = 0 then: nothing to exchange
  for (int64_t off = 0; off < n; off += max_chunk_) {
    int count = int(std::min(max_chunk_, n - off));
    if (polite_wait_) {
      MPI_Request request;
      HT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, comm_, &request));
      wait_politely(&request);
    } else {
      HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, comm_));
    }
  }
}

}  // namespace hetrain::dist
