// hetrain/dist/elastic.hpp — the shared state of the asynchronous and hybrid modes, in MPI-3 one-sided
// memory (docs/architecture.md, "Training modes").
//
// ElasticCenter: the center model of elastic averaging SGD. It is sharded over every rank of the
// communicator (rank r hosts a contiguous slice), so no one process serves every push. Workers read it
// and add their elastic differences into it with passive-target operations: no rank takes part in another
// rank's read or push.
//
// SampleCounter: the global sample counter, plus the count of center updates and a stop flag, on rank 0.
// Workers claim their next local batch from it with MPI_Fetch_and_op, so the samples of the epoch
// permutations are handed out exactly once, faster ranks simply claiming more often.
//
// Both are created and closed collectively; in between every call is one-sided and completes (flushes)
// before it returns.
//
// With a 16-bit wire (--reduce-precision bf16|fp16) the trades travel in 16 bits while the center stays FP32
// (docs/architecture.md, "16-bit center trades"): MPI cannot add 16-bit values into an FP32 window (an
// accumulate's origin and target types must match), so each shard's owner takes part. It keeps a 16-bit copy
// of its shard that trades read, and an inbox per rank that pushes are put into; it adds what was posted
// into its FP32 shard whenever it serves (serve(): between layers and in every wait of these modes, through
// RmaProgress::poll). A push returns once every owner has added it, serving this rank's own inbox meanwhile.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hetrain/dist/wire.hpp"

namespace hetrain::dist {

class ElasticCenter {
 public:
  // Collective. Every rank passes the same initial values (the replicas start identical). `wire`: what
  // trades (read_for_trade, push) travel as; `stall_seconds`: how long a push waits for an owner to take it
  // before it throws naming that rank (--stall-timeout; 16-bit wire only).
  ElasticCenter(MPI_Comm comm, int64_t count, const float* initial, Wire wire = Wire::FP32,
                double stall_seconds = 300);
  ~ElasticCenter();  // frees nothing unless close() ran: MPI_Win_free is collective
  ElasticCenter(const ElasticCenter&) = delete;
  ElasticCenter& operator=(const ElasticCenter&) = delete;

  int64_t count() const { return count_; }
  Wire wire() const { return wire_; }
  // The whole center into out[0, count), exactly: element-wise atomic against concurrent pushes
  // (MPI_Get_accumulate with MPI_NO_OP), though different elements may come from before and after another
  // rank's push. For checkpoints, evaluation and the end of a run.
  void read(float* out);
  // center += delta, element-wise atomic (MPI_Accumulate with MPI_SUM), in FP32 whatever the wire.
  void add(const float* delta);
  // What a trade reads: read() on an FP32 wire; on a 16-bit wire each owner's 16-bit copy of its shard,
  // widened: the center rounded to 16 bits as of the owner's last serve(), which comes after every push
  // it has acknowledged.
  void read_for_trade(float* out);
  // What a trade pushes: add() on an FP32 wire; on a 16-bit wire delta rounded to 16 bits (an FP16 value
  // above 65504 throws naming --reduce-precision), put in each owner's inbox and added there in FP32.
  // Returns when every owner has added its part (so a checkpoint read after it holds the push).
  void push(const float* delta);
  // As a shard owner: adds the pushes posted in this rank's inbox into its shard, refreshes the shard's
  // 16-bit copy, then acknowledges them. Nothing to do on an FP32 wire. Not re-entrant (a nested call
  // returns at once).
  void serve();
  // Collective: ends the access epochs and frees the windows. Every rank's pushes are complete before.
  void close();

  // Rank r's slice [first, first + size): the first count % ranks slices hold one element more.
  static void shard(int64_t count, int ranks, int r, int64_t* first, int64_t* size);

 private:
  struct Sixteen;  // the 16-bit wire's windows and buffers (src/dist/center_wire.hpp)
  void open_sixteen(const float* initial);
  void close_sixteen();
  void read_sixteen(float* out);
  void push_sixteen(const float* delta);
  void add_to_shard(const std::vector<const uint16_t*>& slots);
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  float* shard_ = nullptr;  // this rank's shard: the window's memory
  int64_t count_ = 0;
  int ranks_ = 1, rank_ = 0;
  Wire wire_ = Wire::FP32;
  double stall_seconds_ = 300;
  std::vector<int64_t> first_, size_;
  std::unique_ptr<Sixteen> sixteen_;
  bool open_ = false;
};

// Waits for `request` (a collective of the asynchronous modes: a group's broadcast, the end's barrier)
// while serving this rank's shard of a 16-bit center, so that a rank waiting in it never holds up another
// rank's push (which may be what the collective is waiting for).
void wait_serving(MPI_Request* request);

class SampleCounter {
 public:
  // Collective. The count of claimed samples starts at `first_sample` (a resumed run continues where its
  // checkpoint stopped).
  SampleCounter(MPI_Comm comm, int64_t first_sample);
  ~SampleCounter();
  SampleCounter(const SampleCounter&) = delete;
  SampleCounter& operator=(const SampleCounter&) = delete;

  struct Claim {
    int64_t first = 0;     // this caller's samples are [first, first + n), when not stopped
    bool stopped = false;  // a stop came first: nothing was claimed, and stop_position() says where
  };
  // Adds n to the claimed count, atomically with reading whether a stop came first.
  Claim claim(int64_t n);
  // Samples claimed so far (up to the stop, after one).
  int64_t claimed();
  int64_t count_update();           // adds one to the center-update count; returns the count before
  int64_t updates();                // the center-update count
  // A stop signal on this rank: every later claim anywhere says stopped. The count at that moment is the
  // stop position, the same for every rank (collective decisions in the asynchronous modes rely on it).
  void request_stop();
  int64_t stop_position();          // after a claim said stopped
  // What each rank has done, a row per world rank, summed since the start of this process: for the
  // progress and metrics lines (rates, staleness) and as a heartbeat (the stall watch: a rank whose
  // `steps` stop growing while it is not `finished` has stalled).
  struct RankStats {
    int64_t samples = 0;     // samples trained
    int64_t steps = 0;       // local steps
    int64_t pushes = 0;      // trades with the center (group leaders)
    int64_t staleness = 0;   // sum over the pushes of the center updates between read and push
    int64_t compute_us = 0, wait_us = 0, comm_us = 0;  // microseconds of compute, data wait, communication
    int64_t idle_us = 0;     // microseconds waiting for the other members of its group (hybrid)
    int64_t finished = 0;    // 1 once the rank left its training loop
    int64_t skipped = 0;     // local steps skipped for an FP16 overflow (train/loss_scale.hpp)
    // Levels, not counts: each rank adds the change since its last row, so the row holds its latest
    // figures (train/report.hpp, MemoryFigures): resident host bytes now and at most, and hetrain's own
    // device allocations now and at most (0 on a CPU rank).
    int64_t host_bytes = 0, host_peak_bytes = 0, device_bytes = 0, device_peak_bytes = 0;
  };
  void add_stats(int rank, const RankStats& delta);  // element-wise sum into `rank`'s row (one accumulate)
  std::vector<RankStats> stats();                   // every rank's row

  // Mid-run checkpoints of the center need a sample position P such that every claim before P has been
  // pushed into the center: a resume from P then loses no sample (claims past P are trained again).
  // Each group leader keeps, in its row, the first position of its oldest claim not yet pushed:
  // begin_claim() before it claims with nothing pending, claimed_at(first) after, pushed() after a push.
  void begin_claim(int rank);
  void claimed_at(int rank, int64_t first);
  void pushed(int rank);
  // min(claimed count, every leader's oldest unpushed claim), or -1 while some leader is between
  // begin_claim() and claimed_at() (ask again later). The center read after this call holds every push
  // of the claims before the returned position.
  int64_t settled_position();
  void close();                     // collective

 private:
  int64_t fetch_and_op(int slot, int64_t operand, MPI_Op op);
  MPI_Win win_ = MPI_WIN_NULL;
  int ranks_ = 1;
  bool open_ = false;
};

// --groups speed: ranks of similar speed in one group. `samples_per_s[r]` is rank r's measured rate. In
// order of decreasing speed, a rank joins the group of the rank before it while its speed is at least
// `within` times the fastest of that group; otherwise it starts a new one. Returns a group id per rank:
// the lowest rank of its group. Deterministic (ties in speed keep rank order).
std::vector<int> speed_groups(const std::vector<double>& samples_per_s, double within);

// Keeps passive-target operations aimed at this rank moving while it computes. Over shared memory
// (Open MPI's osc/sm) a read or push needs nothing from its target; over a network (osc/pt2pt, osc/ucx) it
// waits until the target enters MPI, which a training rank does once a step. poll() enters MPI
// (MPI_Iprobe on a private communicator, nothing is ever sent there) from the main thread, as
// MPI_THREAD_FUNNELED allows; the training loop calls it between layers (nn::set_between_layers_hook).
// A helper thread would need MPI_THREAD_MULTIPLE, under which Open MPI 4.1 offers no osc/pt2pt at all.
class RmaProgress {
 public:
  explicit RmaProgress(MPI_Comm comm);  // collective (duplicates comm); becomes the one poll() uses
  ~RmaProgress();
  RmaProgress(const RmaProgress&) = delete;
  RmaProgress& operator=(const RmaProgress&) = delete;
  // No-op without a live RmaProgress; rate-limited to one probe per 100 µs. Also serves the live 16-bit
  // center's shard (ElasticCenter::serve), if any.
  static void poll();
  void close();        // collective: frees the private communicator

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace hetrain::dist
