// Gradient reduction over MPI: the weight b_r/B, then sums that are flat or hierarchical across nodes, either
// blocking or started per bucket and overlapped with backward, in FP32 or 16 bits on the wire
// (docs/architecture.md, "Gradient reduction" and "16-bit transport").
#include "hetrain/dist/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>
#include <utility>

#include "hetrain/error.hpp"

namespace hetrain::dist {

Communicator::~Communicator() = default;

void apply_weight(float* grads, int64_t n, double weight) {
  HT_CHECK(weight >= 0.0 && weight <= 1.0, "weighted_allreduce: weight ", weight, " outside [0, 1]");
  if (weight == 0.0) {
    std::fill(grads, grads + n, 0.0f);  // b_r = 0: contribute nothing, whatever the buffer holds
  } else if (weight != 1.0) {
    const float w = float(weight);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) grads[i] *= w;
  }
}

void Communicator::allreduce_sum_on_wire(float* data, int64_t n, Wire wire) {
  HT_CHECK(!is_16bit(wire), "--reduce-precision ", wire_name(wire), ": the ", name(),
           " reduction has no 16-bit transport");
  allreduce_sum(data, n);
}

void Communicator::weighted_allreduce(float* grads, int64_t n, double weight, Wire wire) {
  apply_weight(grads, n, weight);
  allreduce_sum_on_wire(grads, n, wire);
}

void Communicator::start_weighted_allreduce(float* grads, int64_t n, double weight, Wire wire) {
  HT_CHECK(weight >= 0.0 && weight <= 1.0, "weighted_allreduce: weight ", weight, " outside [0, 1]");
  HT_CHECK(carries(wire), "--reduce-precision ", wire_name(wire), ": the ", name(), " reduction has no 16-bit transport");
  deferred_.push_back({grads, n, weight, wire});
}

// Buckets arrive in reverse order of the buffer (backward's order), each ending where the previous one
// began: merged, the whole buffer is one call, exactly as without buckets.
void Communicator::wait_all() {
  std::vector<Deferred> work;
  work.swap(deferred_);  // cleared even if a reduction throws
  for (size_t i = 0; i < work.size();) {
    Deferred run = work[i++];
    while (i < work.size() && work[i].weight == run.weight && work[i].wire == run.wire &&
           work[i].data + work[i].n == run.data) {
      run.data = work[i].data;
      run.n += work[i++].n;
    }
    weighted_allreduce(run.data, run.n, run.weight, run.wire);
  }
}

Hierarchy parse_hierarchy(const std::string& text) {
  if (text == "auto") return Hierarchy::Auto;
  if (text == "on") return Hierarchy::On;
  if (text == "off") return Hierarchy::Off;
  HT_THROW("--hierarchical must be auto, on or off, got ", quoted(text));
}

bool use_hierarchy(Hierarchy h, int nodes, int max_ranks_per_node) {
  if (h == Hierarchy::On) return true;
  if (h == Hierarchy::Off) return false;
  return nodes > 1 && max_ranks_per_node > 1;  // one node: nothing crosses a network; one rank per node: no gain
}

bool node_oversubscribed(int local_ranks) {
  return local_ranks > int(std::max(1u, std::thread::hardware_concurrency()));
}

// ---------------------------------------------------------------- MPI
namespace {
MPI_Comm checked(MPI_Comm c) {
  if (c != MPI_COMM_NULL) HT_MPI_CHECK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  return c;
}
MPI_Comm duplicate(MPI_Comm c) {
  MPI_Comm out = MPI_COMM_NULL;
  HT_MPI_CHECK(MPI_Comm_dup(c, &out));
  return checked(out);
}

// MPI libraries spin while they wait. When ranks outnumber cores, a rank that finished its share early
// would burn the core a slower rank needs; sleeping briefly between tests hands it over.
void nap() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }
void wait_politely(MPI_Request* request, bool nap_between, const std::function<void()>& idle) {
  int done = 0;
  HT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
  while (!done) {
    if (nap_between) nap();
    idle();
    HT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
  }
}
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int64_t max_chunk, bool polite_wait, MPI_Comm node_comm)
    : max_chunk_(max_chunk > 0 ? std::min<int64_t>(max_chunk, INT_MAX) : INT_MAX), polite_wait_(polite_wait) {
  if (node_comm == MPI_COMM_NULL) {
    owned_ = {duplicate(comm), duplicate(comm), duplicate(comm)};
    stages_ = {stage(Op::Allreduce, owned_[0])};
    stages16_ = {stage(Op::Exchange16, owned_[1]), stage(Op::Gather16, owned_[2])};
    return;
  }
  // Node leaders (node rank 0) form their own communicator, ordered by their rank in comm.
  int rank = 0, node_rank = 0;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_rank(node_comm, &node_rank));
  MPI_Comm leaders = MPI_COMM_NULL;
  HT_MPI_CHECK(MPI_Comm_split(comm, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders));
  int leader = node_rank == 0 ? 1 : 0;
  HT_MPI_CHECK(MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm));
  // The reduce and the broadcast inside a node get a communicator each, so that a bucket's broadcast and
  // the next bucket's reduce are never ordered against each other.
  owned_ = {duplicate(node_comm), checked(leaders), duplicate(node_comm)};
  const MPI_Comm exchange = leaders == MPI_COMM_NULL ? MPI_COMM_NULL : duplicate(leaders);
  const MPI_Comm gather = leaders == MPI_COMM_NULL ? MPI_COMM_NULL : duplicate(leaders);
  owned_.push_back(exchange), owned_.push_back(gather);
  stages_ = {stage(Op::ReduceToRoot, owned_[0]), stage(Op::Allreduce, owned_[1]), stage(Op::BcastFromRoot, owned_[2])};
  stages16_ = {stages_[0], stage(Op::Exchange16, exchange), stage(Op::Gather16, gather), stages_[2]};
  name_ = "mpi (hierarchical over " + std::to_string(nodes_) + (nodes_ == 1 ? " node)" : " nodes)");
}

MpiCommunicator::Stage MpiCommunicator::stage(Op op, MPI_Comm comm) const {
  Stage s{op, comm};
  if (comm != MPI_COMM_NULL) {
    HT_MPI_CHECK(MPI_Comm_rank(comm, &s.rank));
    HT_MPI_CHECK(MPI_Comm_size(comm, &s.size));
  }
  return s;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm& c : owned_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

void MpiCommunicator::allreduce_sum(float* data, int64_t n) {
  HT_CHECK(n >= 0, "allreduce_sum: negative length ", n);
  HT_CHECK(in_flight_.empty(), "internal: a blocking reduction while started buckets are unfinished");
  if (n == 0) return;  // every rank has n = 0 then: nothing to exchange
  for (int64_t off = 0; off < n; off += max_chunk_) {
    const int count = int(std::min(max_chunk_, n - off));
    float* chunk = data + off;
    for (const Stage& s : stages_) {
      if (s.comm == MPI_COMM_NULL) continue;  // a non-leader in the leaders' stage
      if (s.op == Op::Allreduce && !polite_wait_ && !has_idle_hook()) {
        HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, chunk, count, MPI_FLOAT, MPI_SUM, s.comm));
        continue;
      }
      InFlight f;
      f.data = chunk, f.n = count;
      start_stage(f, s);  // one chunk: one request
      if (polite_wait_ || has_idle_hook()) {
        wait_politely(&f.requests[0], polite_wait_, [this] { idle(); });
      } else {
        HT_MPI_CHECK(MPI_Wait(&f.requests[0], MPI_STATUS_IGNORE));
      }
    }
  }
}

void MpiCommunicator::start_stage(InFlight& f, const Stage& s) {
  f.ending = true;
  if (s.comm == MPI_COMM_NULL) return;
  if (s.op == Op::Exchange16 || s.op == Op::Gather16) {
    start_16bit_stage(f, s);
    return;
  }
  const int rank = s.rank;
  for (int64_t off = 0; off < f.n; off += max_chunk_) {
    const int count = int(std::min(max_chunk_, f.n - off));
    float* chunk = f.data + off;
    MPI_Request r = MPI_REQUEST_NULL;
    switch (s.op) {
      case Op::Allreduce:
        HT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, chunk, count, MPI_FLOAT, MPI_SUM, s.comm, &r));
        break;
      case Op::ReduceToRoot:
        if (rank == 0)
          HT_MPI_CHECK(MPI_Ireduce(MPI_IN_PLACE, chunk, count, MPI_FLOAT, MPI_SUM, 0, s.comm, &r));
        else
          HT_MPI_CHECK(MPI_Ireduce(chunk, nullptr, count, MPI_FLOAT, MPI_SUM, 0, s.comm, &r));
        break;
      case Op::BcastFromRoot:
        HT_MPI_CHECK(MPI_Ibcast(chunk, count, MPI_FLOAT, 0, s.comm, &r));
        break;
      case Op::Exchange16:
      case Op::Gather16:
        break;  // started above
    }
    f.requests.push_back(r);
  }
}

// Exchange16 sends block k of this rank's values, rounded to 16 bits, to rank k and receives every rank's
// block of its own. Gather16 sums those in FP32 in rank order, rounds the sum to 16 bits once, and gathers
// every rank's rounded block; end_stage widens the result into the bucket. Each block has the same owner on
// every rank, so every rank ends with the same bits.
void MpiCommunicator::start_16bit_stage(InFlight& f, const Stage& s) {
  const int64_t ranks = s.size;
  if (s.op == Op::Exchange16) {
    f.block = (f.n + ranks - 1) / ranks;
    HT_CHECK(f.block <= INT_MAX, "--reduce-precision: a bucket of ", f.n, " values is too large for one exchange");
    f.sent.assign(size_t(f.block * ranks), 0);  // the padding of the last block sends zeros
    f.got.resize(size_t(f.block * ranks));
    narrow_to_wire(f.data, f.sent.data(), f.n, f.wire);
    MPI_Request r = MPI_REQUEST_NULL;
    HT_MPI_CHECK(MPI_Ialltoall(f.sent.data(), int(f.block), MPI_UINT16_T, f.got.data(), int(f.block), MPI_UINT16_T,
                               s.comm, &r));
    f.requests.push_back(r);
    return;
  }
  sum_on_wire(f.got.data(), ranks, f.block, f.sent.data() + s.rank * f.block, f.wire);
  MPI_Request r = MPI_REQUEST_NULL;
  HT_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, f.sent.data(), int(f.block), MPI_UINT16_T, s.comm, &r));
  f.requests.push_back(r);
}

void MpiCommunicator::end_stage(InFlight& f, const Stage& s) {
  if (s.comm == MPI_COMM_NULL || s.op != Op::Gather16) return;
  widen_from_wire(f.sent.data(), f.data, f.n, f.wire);
}

void MpiCommunicator::begin(float* data, int64_t n, Wire wire) {
  HT_CHECK(in_flight_.empty() || in_flight_.front().wire == wire,
           "internal: buckets of different --reduce-precision in flight at once");
  InFlight f;
  f.data = data, f.n = n, f.wire = wire;
  f.stages = is_16bit(wire) ? &stages16_ : &stages_;
  if (is_16bit(wire)) {
    for (std::vector<uint16_t>* buffer : {&f.sent, &f.got}) {
      if (spare_.empty()) break;
      *buffer = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  in_flight_.push_back(std::move(f));
  advance(in_flight_.size() - 1);
}

void MpiCommunicator::allreduce_sum_on_wire(float* data, int64_t n, Wire wire) {
  if (!is_16bit(wire)) return allreduce_sum(data, n);
  HT_CHECK(n >= 0, "allreduce_sum: negative length ", n);
  HT_CHECK(in_flight_.empty(), "internal: a blocking reduction while started buckets are unfinished");
  begin(data, n, wire);
  wait_all();
}

void MpiCommunicator::start_weighted_allreduce(float* grads, int64_t n, double weight, Wire wire) {
  HT_CHECK(n >= 0, "start_weighted_allreduce: negative length ", n);
  apply_weight(grads, n, weight);
  begin(grads, n, wire);
}

// A bucket moves to its next stage when the current one is done, and starts a stage only after the bucket
// before it has started that stage: every communicator then sees the buckets in the same order on every
// rank, as MPI requires of collectives, however differently the ranks progress.
bool MpiCommunicator::advance(size_t index) {
  InFlight& f = in_flight_[index];
  const std::vector<Stage>& stages = *f.stages;
  for (;;) {
    if (!f.requests.empty()) {
      int done = 0;
      HT_MPI_CHECK(MPI_Testall(int(f.requests.size()), f.requests.data(), &done, MPI_STATUSES_IGNORE));
      if (!done) return false;
      f.requests.clear();
    }
    if (f.ending) {
      f.ending = false;
      end_stage(f, stages[f.begun - 1]);
    }
    if (f.begun == stages.size()) return true;
    if (index > 0 && in_flight_[index - 1].begun <= f.begun) return false;
    start_stage(f, stages[f.begun++]);
  }
}

void MpiCommunicator::progress() {
  for (size_t i = 0; i < in_flight_.size(); ++i) advance(i);
}

int64_t MpiCommunicator::finished() const {
  size_t n = 0;
  while (n < in_flight_.size() && finished(in_flight_[n])) ++n;
  return int64_t(n);
}

// The later buckets advance too while this waits for the first ones.
void MpiCommunicator::wait_first(int64_t count) {
  HT_CHECK(count >= 0 && size_t(count) <= in_flight_.size(), "internal: waiting for ", count, " of ",
           in_flight_.size(), " started buckets");
  for (;;) {
    bool first = true;
    for (size_t i = 0; i < in_flight_.size(); ++i) {
      const bool done = advance(i);
      if (i < size_t(count)) first = first && done;
    }
    if (first) return;
    if (polite_wait_) nap();
    idle();
  }
}

void MpiCommunicator::wait_all() {
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < in_flight_.size(); ++i) all = advance(i) && all;
    if (all) break;
    if (polite_wait_) nap();
    idle();
  }
  for (InFlight& f : in_flight_)
    for (std::vector<uint16_t>* buffer : {&f.sent, &f.got})
      if (buffer->capacity() > 0) spare_.push_back(std::move(*buffer));
  in_flight_.clear();
}

}  // namespace hetrain::dist
