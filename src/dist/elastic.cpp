// The asynchronous modes' shared center model and sample counter in MPI one-sided memory.
#include "hetrain/dist/elastic.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <type_traits>

#include "dist/center_wire.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

// MPI_Win_allocate with a message that says what to do: the usual failure is Open MPI choosing its RDMA
// one-sided component across nodes that have no RDMA network.
void allocate_window(MPI_Aint bytes, int unit, MPI_Comm comm, void* base, MPI_Win* win, const char* what) {
  const int rc = MPI_Win_allocate(bytes, unit, MPI_INFO_NULL, comm, base, win);
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  HT_THROW("--mode async/hybrid: MPI cannot create the one-sided window of the ", what, " (MPI_Win_allocate: ",
           std::string(text, size_t(len)), "); with Open MPI across nodes without an RDMA network, run "
           "mpirun --mca osc pt2pt (or export OMPI_MCA_osc=pt2pt) — see docs/architecture.md");
}

void ElasticCenter::shard(int64_t count, int ranks, int r, int64_t* first, int64_t* size) {
  const int64_t base = count / ranks, extra = count % ranks;
  *size = base + (r < extra ? 1 : 0);
  *first = r * base + std::min<int64_t>(r, extra);
}

ElasticCenter::ElasticCenter(MPI_Comm comm, int64_t count, const float* initial, Wire wire, double stall_seconds)
    : comm_(comm), count_(count), wire_(wire), stall_seconds_(stall_seconds) {
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  HT_MPI_CHECK(MPI_Comm_size(comm, &ranks_));
  const int rank = rank_;
  first_.resize(size_t(ranks_));
  size_.resize(size_t(ranks_));
  for (int r = 0; r < ranks_; ++r) shard(count, ranks_, r, &first_[size_t(r)], &size_[size_t(r)]);
  HT_CHECK(size_[0] <= INT32_MAX, "elastic center: a shard of ", size_[0], " floats is too large for MPI counts");
  float* mine = nullptr;
  allocate_window(MPI_Aint(size_[size_t(rank)] * sizeof(float)), sizeof(float), comm, &mine, &win_, "center model");
  HT_MPI_CHECK(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
  if (size_[size_t(rank)] > 0)
    std::memcpy(mine, initial + first_[size_t(rank)], size_t(size_[size_t(rank)]) * sizeof(float));
  shard_ = mine;
  // Every shard holds its initial values before anyone reads: then one passive-target epoch for the run.
  HT_MPI_CHECK(MPI_Barrier(comm));
  HT_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
  open_ = true;
  if (is_16bit(wire_)) open_sixteen(initial);
}

void ElasticCenter::read(float* out) {
  for (int r = 0; r < ranks_; ++r) {
    const int n = int(size_[size_t(r)]);
    if (n == 0) continue;
    HT_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_FLOAT, out + first_[size_t(r)], n, MPI_FLOAT, r, 0, n, MPI_FLOAT,
                                    MPI_NO_OP, win_));
  }
  HT_MPI_CHECK(MPI_Win_flush_all(win_));
}

void ElasticCenter::add(const float* delta) {
  for (int r = 0; r < ranks_; ++r) {
    const int n = int(size_[size_t(r)]);
    if (n == 0) continue;
    HT_MPI_CHECK(MPI_Accumulate(delta + first_[size_t(r)], n, MPI_FLOAT, r, 0, n, MPI_FLOAT, MPI_SUM, win_));
  }
  HT_MPI_CHECK(MPI_Win_flush_all(win_));
}

void ElasticCenter::read_for_trade(float* out) {
  if (is_16bit(wire_)) return read_sixteen(out);
  read(out);
}

void ElasticCenter::push(const float* delta) {
  if (is_16bit(wire_)) return push_sixteen(delta);
  add(delta);
}

void ElasticCenter::close() {
  if (!open_) return;
  open_ = false;
  if (sixteen_) close_sixteen();
  HT_MPI_CHECK(MPI_Win_unlock_all(win_));
  HT_MPI_CHECK(MPI_Win_free(&win_));
}

namespace {
// Slots of rank 0's window. The stop flag is a high bit of the claimed count itself, so a claim learns in
// one atomic operation whether a stop came first. Only the first rank to request a stop (kStopRequests)
// sets it, and then writes the stop position (+1; 0 = not yet written). Then a row per world rank: its
// RankStats, then its oldest unpushed claim (kNothingPending, kClaiming, or the position + 1).
constexpr int kClaimed = 0, kUpdates = 1, kStopRequests = 2, kStopPosition = 3, kSlots = 4;
constexpr int kStats = int(sizeof(SampleCounter::RankStats) / sizeof(int64_t)), kRow = kStats + 1;
constexpr int64_t kStopBit = int64_t(1) << 60;
constexpr int64_t kNothingPending = 0, kClaiming = -1;
static_assert(sizeof(SampleCounter::RankStats) == 14 * sizeof(int64_t), "RankStats travels as 14 int64");
int row(int rank) { return kSlots + rank * kRow; }
}  // namespace

SampleCounter::SampleCounter(MPI_Comm comm, int64_t first_sample) {
  int rank = 0;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &ranks_));
  int64_t* slots = nullptr;
  const int count = kSlots + ranks_ * kRow;
  const MPI_Aint bytes = rank == 0 ? MPI_Aint(count * sizeof(int64_t)) : 0;
  allocate_window(bytes, sizeof(int64_t), comm, &slots, &win_, "sample counter");
  HT_MPI_CHECK(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
  if (rank == 0) {
    for (int i = 0; i < count; ++i) slots[i] = 0;
    slots[kClaimed] = first_sample;
  }
  HT_MPI_CHECK(MPI_Barrier(comm));
  HT_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
  open_ = true;
}

SampleCounter::~SampleCounter() = default;

int64_t SampleCounter::fetch_and_op(int slot, int64_t operand, MPI_Op op) {
  int64_t before = 0;
  HT_MPI_CHECK(MPI_Fetch_and_op(&operand, &before, MPI_INT64_T, 0, slot, op, win_));
  HT_MPI_CHECK(MPI_Win_flush(0, win_));
  return before;
}

SampleCounter::Claim SampleCounter::claim(int64_t n) {
  const int64_t before = fetch_and_op(kClaimed, n, MPI_SUM);
  Claim c;
  c.stopped = (before & kStopBit) != 0;
  c.first = before & (kStopBit - 1);
  return c;
}

int64_t SampleCounter::claimed() {
  const int64_t now = fetch_and_op(kClaimed, 0, MPI_NO_OP);
  return (now & kStopBit) ? stop_position() : now;
}

int64_t SampleCounter::count_update() { return fetch_and_op(kUpdates, 1, MPI_SUM); }
int64_t SampleCounter::updates() { return fetch_and_op(kUpdates, 0, MPI_NO_OP); }

void SampleCounter::request_stop() {
  if (fetch_and_op(kStopRequests, 1, MPI_SUM) > 0) return;  // another rank's stop stands
  const int64_t before = fetch_and_op(kClaimed, kStopBit, MPI_SUM);
  fetch_and_op(kStopPosition, before + 1, MPI_REPLACE);
}

int64_t SampleCounter::stop_position() {
  // The stopping rank writes the position right after setting the bit: at most a few operations away.
  for (;;) {
    const int64_t p = fetch_and_op(kStopPosition, 0, MPI_NO_OP);
    if (p > 0) return p - 1;
  }
}

void SampleCounter::add_stats(int rank, const RankStats& delta) {
  HT_MPI_CHECK(MPI_Accumulate(&delta, kStats, MPI_INT64_T, 0, row(rank), kStats, MPI_INT64_T, MPI_SUM, win_));
  HT_MPI_CHECK(MPI_Win_flush(0, win_));
}

std::vector<SampleCounter::RankStats> SampleCounter::stats() {
  std::vector<int64_t> all(size_t(ranks_) * kRow, 0);
  HT_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_INT64_T, all.data(), int(all.size()), MPI_INT64_T, 0, kSlots,
                                  int(all.size()), MPI_INT64_T, MPI_NO_OP, win_));
  HT_MPI_CHECK(MPI_Win_flush(0, win_));
  std::vector<RankStats> out(static_cast<size_t>(ranks_));
  for (int r = 0; r < ranks_; ++r) {
    static_assert(std::is_trivially_copyable_v<RankStats>);
    std::memcpy(static_cast<void*>(&out[size_t(r)]), &all[size_t(r) * kRow], sizeof(RankStats));
  }
  return out;
}

void SampleCounter::begin_claim(int rank) { fetch_and_op(row(rank) + kStats, kClaiming, MPI_REPLACE); }
void SampleCounter::claimed_at(int rank, int64_t first) { fetch_and_op(row(rank) + kStats, first + 1, MPI_REPLACE); }
void SampleCounter::pushed(int rank) { fetch_and_op(row(rank) + kStats, kNothingPending, MPI_REPLACE); }

int64_t SampleCounter::settled_position() {
  // The claimed count first: a claim that is not yet in a leader's row when the rows are read began after
  // this read, so it starts at or after the count read here.
  int64_t position = claimed();
  std::vector<int64_t> all(size_t(ranks_) * kRow, 0);
  HT_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_INT64_T, all.data(), int(all.size()), MPI_INT64_T, 0, kSlots,
                                  int(all.size()), MPI_INT64_T, MPI_NO_OP, win_));
  HT_MPI_CHECK(MPI_Win_flush(0, win_));
  for (int r = 0; r < ranks_; ++r) {
    const int64_t pending = all[size_t(r) * kRow + kStats];
    if (pending == kClaiming) return -1;
    if (pending != kNothingPending) position = std::min(position, pending - 1);
  }
  return position;
}

std::vector<int> speed_groups(const std::vector<double>& samples_per_s, double within) {
  std::vector<int> order(samples_per_s.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = int(r);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return samples_per_s[size_t(a)] > samples_per_s[size_t(b)]; });
  std::vector<int> group(samples_per_s.size(), 0);
  std::vector<int> members;
  double fastest = 0;
  auto close_group = [&] {
    const int id = members.empty() ? 0 : *std::min_element(members.begin(), members.end());
    for (int m : members) group[size_t(m)] = id;
    members.clear();
  };
  for (int r : order) {
    const double speed = samples_per_s[size_t(r)];
    if (!members.empty() && !(speed >= within * fastest)) close_group();
    if (members.empty()) fastest = speed;
    members.push_back(r);
  }
  close_group();
  return group;
}

void SampleCounter::close() {
  if (!open_) return;
  open_ = false;
  HT_MPI_CHECK(MPI_Win_unlock_all(win_));
  HT_MPI_CHECK(MPI_Win_free(&win_));
}

namespace {
MPI_Comm g_progress_comm = MPI_COMM_NULL;
}

RmaProgress::RmaProgress(MPI_Comm comm) {
  HT_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  g_progress_comm = comm_;
}

RmaProgress::~RmaProgress() {
  if (g_progress_comm == comm_) g_progress_comm = MPI_COMM_NULL;
}

void RmaProgress::poll() {
  if (g_progress_comm == MPI_COMM_NULL) return;
  static auto last = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::microseconds(100)) return;
  last = now;
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g_progress_comm, &flag, MPI_STATUS_IGNORE);
  serve_live_center();
}

void RmaProgress::close() {
  if (g_progress_comm == comm_) g_progress_comm = MPI_COMM_NULL;
  if (comm_ != MPI_COMM_NULL) HT_MPI_CHECK(MPI_Comm_free(&comm_));
}

}  // namespace hetrain::dist
