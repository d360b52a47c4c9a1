// dist/center_wire.cpp — the asynchronous modes' center trades on a 16-bit wire (--reduce-precision
// bf16|fp16; docs/architecture.md, "16-bit center trades"). The center itself stays FP32.
//
// Rank r owns the shard [first_r, first_r + S_r) of the FP32 center (src/dist/elastic.cpp) and three more
// windows:
//   copy    S_r 16-bit values: the shard rounded, which trades read (MPI_Get_accumulate with MPI_NO_OP)
//   inbox   ranks × S_r 16-bit values: rank o's pushes land in slot o (MPI_Put)
//   flags   2 × ranks int64: slot o's posted count (raised by o) and consumed count (raised by r)
// A push: rank o rounds its delta, puts each shard's part into slot o of the owner's inbox, flushes, raises
// its posted count there and waits until every owner's consumed count has caught up, serving its own inbox
// meanwhile. An owner serves (serve(): RmaProgress::poll, between layers and in the waits of these modes):
// it adds the newly posted slots into its FP32 shard and rewrites its copy in one pass (add_to_shard), then
// raises the consumed counts. A slot is written again only after its owner consumed it, so no push
// overwrites one being added.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "dist/center_wire.hpp"
#include "hetrain/dist/elastic.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

namespace {
ElasticCenter* g_live = nullptr;  // the open 16-bit center (one per process: the run's)

using Clock = std::chrono::steady_clock;

// An FP16 value whose exponent bits are all set: Inf or NaN.
bool fp16_nonfinite(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }

// The first i with a finite in[i] that became Inf in out[i] on an FP16 wire, or -1.
int64_t first_overflow(const float* in, const uint16_t* out, int64_t n, Wire wire) {
  if (wire != Wire::FP16) return -1;  // BF16 has float's range
  for (int64_t i = 0; i < n; ++i)
    if (fp16_nonfinite(out[i]) && std::isfinite(in[i])) return i;
  return -1;
}
}  // namespace

void serve_live_center() {
  if (g_live) g_live->serve();
}

ElasticCenter::~ElasticCenter() {
  if (g_live == this) g_live = nullptr;
}

void ElasticCenter::open_sixteen(const float* initial) {
  // Before any collective: every rank holds the same initial values, so every rank refuses alike.
  if (wire_ == Wire::FP16)
    for (int64_t i = 0; i < count_; ++i)
      HT_CHECK(!(std::fabs(initial[i]) >= 65520.0f), "--reduce-precision fp16: the initial weights hold ", initial[i],
               " (value ", i, "), beyond FP16's range of ±65504 on the wire: use --reduce-precision bf16 (float's range) "
               "or fp32");
  sixteen_ = std::make_unique<Sixteen>();
  Sixteen& w = *sixteen_;
  const int64_t mine = size_[size_t(rank_)];
  HT_CHECK(mine * ranks_ <= INT32_MAX, "--reduce-precision ", wire_name(wire_), ": a center inbox of ",
           mine * ranks_, " values is too large for MPI offsets");
  int64_t* flags = nullptr;
  allocate_window(MPI_Aint(mine) * 2, 2, comm_, &w.copy_base, &w.copy, "center's 16-bit copy");
  allocate_window(MPI_Aint(mine) * ranks_ * 2, 2, comm_, &w.inbox_base, &w.inbox, "center's inbox");
  allocate_window(MPI_Aint(2 * ranks_) * MPI_Aint(sizeof(int64_t)), sizeof(int64_t), comm_, &flags, &w.flags,
                  "center's inbox counts");
  for (MPI_Win win : {w.copy, w.inbox, w.flags}) HT_MPI_CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  if (mine > 0) narrow_to_wire(initial + first_[size_t(rank_)], w.copy_base, mine, wire_);
  std::fill(flags, flags + 2 * ranks_, int64_t(0));
  w.out.resize(size_t(count_));
  w.in.resize(size_t(count_));
  w.sent.assign(size_t(ranks_), 0);
  w.consumed.assign(size_t(ranks_), 0);
  w.seen.resize(size_t(2 * ranks_));
  HT_MPI_CHECK(MPI_Barrier(comm_));  // every copy and count is set before anyone reads or pushes
  for (MPI_Win win : {w.copy, w.inbox, w.flags}) HT_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  g_live = this;
}

void ElasticCenter::close_sixteen() {
  if (g_live == this) g_live = nullptr;
  Sixteen& w = *sixteen_;
  for (MPI_Win* win : {&w.copy, &w.inbox, &w.flags}) {
    HT_MPI_CHECK(MPI_Win_unlock_all(*win));
    HT_MPI_CHECK(MPI_Win_free(win));
  }
  sixteen_.reset();
}

void ElasticCenter::read_sixteen(float* out) {
  Sixteen& w = *sixteen_;
  for (int r = 0; r < ranks_; ++r) {
    const int n = int(size_[size_t(r)]);
    if (n == 0) continue;
    HT_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_UINT16_T, w.in.data() + first_[size_t(r)], n, MPI_UINT16_T, r, 0,
                                    n, MPI_UINT16_T, MPI_NO_OP, w.copy));
  }
  HT_MPI_CHECK(MPI_Win_flush_all(w.copy));
  widen_from_wire(w.in.data(), out, count_, wire_);
}

void ElasticCenter::push_sixteen(const float* delta) {
  Sixteen& w = *sixteen_;
  narrow_to_wire(delta, w.out.data(), count_, wire_);
  const int64_t bad = first_overflow(delta, w.out.data(), count_, wire_);
  HT_CHECK(bad < 0, "--reduce-precision fp16: a center push holds ", delta[bad < 0 ? 0 : bad], " (value ", bad,
           "), beyond FP16's range of ±65504 on the wire: use --reduce-precision bf16 (float's range) or fp32");
  std::vector<int> owners;
  for (int r = 0; r < ranks_; ++r) {
    const int n = int(size_[size_t(r)]);
    if (n == 0 || r == rank_) continue;
    HT_MPI_CHECK(MPI_Put(w.out.data() + first_[size_t(r)], n, MPI_UINT16_T, r, MPI_Aint(rank_) * n, n, MPI_UINT16_T,
                         w.inbox));
    owners.push_back(r);
  }
  HT_MPI_CHECK(MPI_Win_flush_all(w.inbox));  // the values are at the owners before their counts say so
  for (int r : owners) {
    ++w.sent[size_t(r)];
    HT_MPI_CHECK(
        MPI_Accumulate(&w.sent[size_t(r)], 1, MPI_INT64_T, r, 2 * rank_, 1, MPI_INT64_T, MPI_REPLACE, w.flags));
  }
  HT_MPI_CHECK(MPI_Win_flush_all(w.flags));
  if (size_[size_t(rank_)] > 0) add_to_shard({w.out.data() + first_[size_t(rank_)]});  // no wire, the same rounding
  // Until every owner has added its part, serving this rank's inbox all along. The owners' counts are
  // asked for at growing intervals (20 µs doubling to 1 ms): each ask is a message across the link, and
  // an owner serves between its layers, milliseconds apart. An owner that serves nothing for
  // --stall-timeout is named.
  const auto start = Clock::now();
  auto next_ask = start;
  auto interval = std::chrono::microseconds(20);
  int64_t dummy = 0;
  while (!owners.empty()) {
    serve();
    const auto now = Clock::now();
    if (now < next_ask) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    for (int r : owners)
      HT_MPI_CHECK(MPI_Fetch_and_op(&dummy, &w.consumed[size_t(r)], MPI_INT64_T, r, 2 * rank_ + 1, MPI_NO_OP, w.flags));
    HT_MPI_CHECK(MPI_Win_flush_all(w.flags));
    owners.erase(std::remove_if(owners.begin(), owners.end(),
                                [&](int r) { return w.consumed[size_t(r)] >= w.sent[size_t(r)]; }),
                 owners.end());
    const double waited = std::chrono::duration<double>(now - start).count();
    HT_CHECK(owners.empty() || stall_seconds_ <= 0 || waited < stall_seconds_, "rank ", rank_, ": rank ",
             owners.empty() ? -1 : owners.front(), " has not taken this rank's 16-bit center push for ", int(waited),
             " s (--stall-timeout): it stopped serving its shard of the center (this rank's pushes to it: ",
             owners.empty() ? 0 : w.sent[size_t(owners.front())], " posted, ",
             owners.empty() ? 0 : w.consumed[size_t(owners.front())], " taken)");
    next_ask = now + interval;
    interval = std::min(interval * 2, std::chrono::microseconds(1000));
  }
}

// One pass over memory, block by block: the slots widened and added into the FP32 shard, the shard rounded
// into its copy. In place, without MPI: on a 16-bit wire nothing but the owner writes its shard or its copy,
// the other ranks only read them (MPI_Get_accumulate), and each aligned float or 16-bit value is written
// whole, so a read sees every element from before or after this pass, as read() documents for pushes.
// MPI_Win_sync on both sides orders these loads and stores with the RMA accesses of the windows.
void ElasticCenter::add_to_shard(const std::vector<const uint16_t*>& slots) {
  Sixteen& w = *sixteen_;
  const int64_t n = size_[size_t(rank_)];
  for (MPI_Win win : {win_, w.copy, w.inbox}) HT_MPI_CHECK(MPI_Win_sync(win));
  constexpr int64_t kBlock = 4096;
  float widened[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    float* shard = shard_ + b;
    for (const uint16_t* slot : slots) {
      widen_from_wire(slot + b, widened, m, wire_);
      for (int64_t i = 0; i < m; ++i) shard[i] += widened[i];
    }
    narrow_to_wire(shard, w.copy_base + b, m, wire_);
    const int64_t bad = first_overflow(shard, w.copy_base + b, m, wire_);
    HT_CHECK(bad < 0, "--reduce-precision fp16: the center holds ", shard[bad < 0 ? 0 : bad], " (value ",
             first_[size_t(rank_)] + b + bad,
             "), beyond FP16's range of ±65504 on the wire: use --reduce-precision bf16");
  }
  for (MPI_Win win : {win_, w.copy}) HT_MPI_CHECK(MPI_Win_sync(win));
}

void ElasticCenter::serve() {
  if (!sixteen_ || !open_) return;
  Sixteen& w = *sixteen_;
  if (w.serving) return;
  w.serving = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{w.serving};
  HT_MPI_CHECK(MPI_Get_accumulate(nullptr, 0, MPI_INT64_T, w.seen.data(), 2 * ranks_, MPI_INT64_T, rank_, 0,
                                  2 * ranks_, MPI_INT64_T, MPI_NO_OP, w.flags));
  HT_MPI_CHECK(MPI_Win_flush(rank_, w.flags));
  const int64_t mine = size_[size_t(rank_)];
  w.posted.clear();
  for (int o = 0; o < ranks_; ++o)
    if (w.seen[size_t(2 * o)] > w.seen[size_t(2 * o + 1)]) w.posted.push_back(w.inbox_base + o * mine);
  if (w.posted.empty()) return;
  add_to_shard(w.posted);  // the copy too, before the acknowledgements: a trade after its push reads it
  for (int o = 0; o < ranks_; ++o) {
    if (w.seen[size_t(2 * o)] <= w.seen[size_t(2 * o + 1)]) continue;
    HT_MPI_CHECK(MPI_Accumulate(&w.seen[size_t(2 * o)], 1, MPI_INT64_T, rank_, 2 * o + 1, 1, MPI_INT64_T, MPI_REPLACE,
                                w.flags));
  }
  HT_MPI_CHECK(MPI_Win_flush(rank_, w.flags));
}

void wait_serving(MPI_Request* request) {
  int done = 0;
  for (int spins = 0;; ++spins) {
    HT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    serve_live_center();
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace hetrain::dist
