#include "train/elastic_group.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <numeric>

#include "hetrain/error.hpp"
#include "train/shared_step.hpp"

namespace hetrain::train {
namespace {

// Ranks within this factor of the fastest of their group share a group under --groups speed (measured
// rates of equal ranks differed by up to 30% with 4 ranks on 2 busy cores).
constexpr double kSpeedGroupWithin = 0.6;

}  // namespace

ElasticGroup::ElasticGroup(const TrainConfig& cfg, Setup& s, const dist::World& world, LocalStep& local_step,
                           int64_t local_batch)
    : world_rank_(world.rank()) {
  comm_ = split_world(cfg, s, world, local_step, local_batch);
  HT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  HT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  if (size_ > 1) {  // the members meet once a local step; one that does not come is named
    std::vector<int> names(static_cast<size_t>(size_));
    const int me = world.rank();
    HT_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, names.data(), 1, MPI_INT, comm_));
    arrival_ = std::make_unique<dist::StepArrival>(comm_, dist::allgather_strings(comm_, world.host()),
                                                   cfg.stall_timeout, names);
  }
  member_batches_.resize(size_t(size_));
  HT_MPI_CHECK(MPI_Allgather(&local_batch, 1, MPI_INT64_T, member_batches_.data(), 1, MPI_INT64_T, comm_));
  batch_ = std::accumulate(member_batches_.begin(), member_batches_.end(), int64_t(0));
  if (size_ > 1) {
    reduction_ = dist::make_gradient_communicator(comm_, s.device_kind, false);
    reduction_->set_idle_hook([a = arrival_.get()] { a->keep_alive(); });
  }
  connect_shared_batch(s, comm_);  // --bn sync, a detector's matches: over the group's batch
  if (size_ > 1 && s.balance_config.mode != dist::BalanceMode::None) make_balancer(s);
  // Every rank learns every rank's group leader (a group is named after its leader's world rank).
  leader_ = rank_ == 0 ? world.rank() : -1;
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader_, 1, MPI_INT, MPI_MAX, comm_));
  leaders_.resize(size_t(world.size()));
  HT_MPI_CHECK(MPI_Allgather(&leader_, 1, MPI_INT, leaders_.data(), 1, MPI_INT, world.comm()));
}

ElasticGroup::~ElasticGroup() {
  arrival_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int ElasticGroup::number(int leader) const {
  int number = 0;
  for (int r = 0; r < leader; ++r) number += leaders_[size_t(r)] == r;
  return number;
}

// Hybrid mode's node, ranks of similar speed or --groups list; async mode's group of one. Collective.
MPI_Comm ElasticGroup::split_world(const TrainConfig& cfg, Setup& s, const dist::World& world, LocalStep& local_step,
                                   int64_t local_batch) {
  int color = world.rank();
  if (s.mode == Mode::Hybrid) {
    if (cfg.groups == "speed") {
      speeds_.assign(size_t(world.size()), 0.0);
      const double mine = measure_speed(cfg, s, local_step, world.rank(), local_batch);
      HT_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_DOUBLE, speeds_.data(), 1, MPI_DOUBLE, world.comm()));
      color = dist::speed_groups(speeds_, kSpeedGroupWithin)[size_t(world.rank())];
    } else {
      const std::vector<int> listed = parse_groups(cfg.groups, world.size());
      if (listed.empty()) {  // "node": named after the lowest world rank on the node
        int lowest = world.rank();
        HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, world.node_comm()));
        color = lowest;
      } else {
        color = listed[size_t(world.rank())];
      }
    }
  }
  MPI_Comm group = MPI_COMM_NULL;
  HT_MPI_CHECK(MPI_Comm_split(world.comm(), color, world.rank(), &group));
  HT_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  return group;
}

// The members' shares of each claim follow their measured speeds, exactly as sync mode's split does
// (dist/balancer.hpp), over the group's communicator and its claims of batch_ samples. Caps: the members'
// memory caps.
void ElasticGroup::make_balancer(const Setup& s) {
  dist::BalanceConfig bc = s.balance_config;
  const int64_t mine = s.memory_cap > 0 ? s.memory_cap : INT64_MAX;
  std::vector<int64_t> caps(static_cast<size_t>(size_));
  HT_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT64_T, caps.data(), 1, MPI_INT64_T, comm_));
  bc.caps.clear();
  if (std::any_of(caps.begin(), caps.end(), [](int64_t c) { return c < INT64_MAX; })) bc.caps = caps;
  balancer_ = std::make_unique<dist::Balancer>(comm_, batch_, bc);
  member_batches_ = balancer_->split();
}

void ElasticGroup::rebalance(int64_t local_steps, bool quiet) {
  if (!balancer_) return;
  dist::RefitVotes votes;
  votes.add(balancer_->vote(local_steps));
  // Summed at a bounded meeting of the members (counts, exact in doubles): one that stops here is named.
  std::vector<double> sums;
  votes.append_to(sums);
  arrival_->arrive(local_steps, sums, "the group's rebalance vote");
  arrival_->step_done();
  votes = dist::RefitVotes::read(sums, 0);
  if (!balancer_->update(local_steps, dist::early_refit_agreed(votes, size_))) return;
  member_batches_ = balancer_->split();
  if (world_rank_ == 0 && !quiet) {
    std::printf("group rebalance: %s\n", balancer_->describe(local_steps).c_str());
    std::fflush(stdout);
  }
}

// The fastest step after a warm-up one, which keeps out steps slowed by a neighbour on a shared machine
// (the groups are fixed for the run, so they follow what the devices can do rather than a passing load).
// Forward and backward of the first samples of the run's order; no SGD step, and the batch-norm statistics
// are put back.
double measure_speed(const TrainConfig& cfg, Setup& s, LocalStep& local_step, int rank, int64_t local_batch) {
  constexpr int kSteps = 12;
  const bool on_gpu = s.device_kind == Device::CUDA;
  nn::ParamBuffer& params = s.model->params();
  const Tensor states = params.states().clone();
  const int64_t b = std::min(local_batch, s.train->info().num_samples);
  std::vector<double> times;
  for (int k = 0; k < kSteps; ++k) {
    s.train->submit(s.plan->span(0, 0, b), false, cfg.seed, on_gpu ? data::BatchForm::Raw : data::BatchForm::Float);
    data::Batch batch = s.train->next();
    DeviceInput::Uploaded input;
    if (on_gpu) input = s.input->upload(batch);
    const auto start = Clock::now();
    local_step.run(batch, input, b);
    double compute = seconds_since(start);
    compute += s.emulator.apply(rank, s.start_step, compute);
    if (k > 0) times.push_back(compute);
  }
  params.states().copy_from(states);
  const double fastest = *std::min_element(times.begin(), times.end());
  return fastest > 0 ? double(b) / fastest : 0.0;
}

Claim ElasticGroup::claim(dist::SampleCounter& counter, int64_t total, bool track, bool& unpushed,
                          int64_t local_step, double& idle_seconds) {
  Claim claim;
  if (leads()) {
    const bool keep_oldest = track && !unpushed;
    if (keep_oldest) counter.begin_claim(world_rank_);
    const dist::SampleCounter::Claim c = counter.claim(batch_);
    if (c.stopped) {
      claim.first = counter.stop_position(), claim.n = -1;
    } else {
      claim.first = c.first;
      claim.n = std::max<int64_t>(0, std::min(batch_, total - c.first));
    }
    if (keep_oldest) counter.claimed_at(world_rank_, c.stopped ? claim.first : c.first);
    unpushed = track && (unpushed || claim.n > 0);
  }
  if (arrival_) {  // to the members (exact in doubles)
    std::vector<double> v = {double(claim.first), double(claim.n)};
    if (!leads()) v = {0.0, 0.0};
    idle_seconds += arrival_->arrive(local_step, v);
    arrival_->step_done();  // the step's later group collectives: bounded by the rank's own watch
    claim.first = int64_t(v[0]), claim.n = int64_t(v[1]);
  }
  return claim;
}

}  // namespace hetrain::train
