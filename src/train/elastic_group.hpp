// The group a rank trains with in the asynchronous modes (docs/architecture.md, "Training modes"): in
// async mode a group of one; in hybrid mode the ranks of a node, ranks of similar measured speed or a
// --groups list. A group trains like a small synchronous job: its leader claims the sum of its members'
// local batches, each member trains its share (fitted to the members' speeds by a balancer on the group's
// communicator, unless --balance none), and the gradients are reduced weighted by the shares.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/local_step.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

// What a group's leader hands its members each local step: samples [first, first + n) of the run's
// order; n = 0: the counter is exhausted; n = -1: a stop at `first`.
struct Claim {
  int64_t first = 0, n = 0;
};

class ElasticGroup {
 public:
  // Collective over the world. `local_batch`: this rank's samples per local step.
  ElasticGroup(const TrainConfig& cfg, Setup& s, const dist::World& world, LocalStep& local_step, int64_t local_batch);
  ~ElasticGroup();
  ElasticGroup(const ElasticGroup&) = delete;
  ElasticGroup& operator=(const ElasticGroup&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }  // within the group; 0 is the leader
  int size() const { return size_; }
  bool leads() const { return rank_ == 0; }
  int leader() const { return leader_; }                     // world rank of this group's leader
  const std::vector<int>& leaders() const { return leaders_; }  // every world rank's leader
  // Groups numbered 0, 1, ... in the order of their leaders' ranks.
  int number(int leader) const;
  int64_t batch() const { return batch_; }  // samples a claim of the group asks for
  const std::vector<int64_t>& member_batches() const { return member_batches_; }
  const std::vector<double>& speeds() const { return speeds_; }  // --groups speed: every rank's samples/s
  // Groups of two or more: the members meet here once a local step (one that does not come is named) and
  // reduce their gradients over `reduction()`; null for a group of one. The reduction's waits send the
  // arrival's signs of life, so a member that fell silent inside it is named too.
  dist::StepArrival* arrival() const { return arrival_.get(); }
  dist::Communicator* reduction() { return reduction_.get(); }
  // The members' balancer (records a member's compute times); null without one.
  dist::Balancer* balancer() { return balancer_.get(); }
  // After each local step, on every member alike: refit on schedule, or at once when a member's newest
  // step left its model (the members agree on that first). Rank 0 prints a new split unless `quiet`.
  void rebalance(int64_t local_steps, bool quiet);
  // The leader claims the group's next samples from `counter` (none at or past `total`) and tells the
  // members in the group's arrival at `local_step` (whose wait is added to `idle_seconds`). `unpushed`: the
  // leader holds a claim not yet pushed into the center; with `track`, the oldest such claim is kept in the
  // leader's row of the counter (mid-run checkpoints need it).
  Claim claim(dist::SampleCounter& counter, int64_t total, bool track, bool& unpushed, int64_t local_step,
              double& idle_seconds);

 private:
  MPI_Comm split_world(const TrainConfig& cfg, Setup& s, const dist::World& world, LocalStep& local_step,
                       int64_t local_batch);
  void make_balancer(const Setup& s);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, leader_ = 0, world_rank_ = 0;
  std::vector<int> leaders_;
  int64_t batch_ = 1;
  std::vector<int64_t> member_batches_;
  std::vector<double> speeds_;
  std::unique_ptr<dist::StepArrival> arrival_;
  std::unique_ptr<dist::Communicator> reduction_;
  std::unique_ptr<dist::Balancer> balancer_;
};

// --groups speed: this rank's samples/s over a few local steps of `local_batch` samples (emulated speed
// included); nothing is learnt.
double measure_speed(const TrainConfig& cfg, Setup& s, LocalStep& local_step, int rank, int64_t local_batch);

}  // namespace hetrain::train
