// Everything a training run needs, built and validated from the configuration before the first step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/dist.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "ops/softmax_xent/softmax_xent.hpp"
#include "train/batch_source.hpp"
#include "train/batch_stats.hpp"
#include "train/detection.hpp"
#include "train/device_step.hpp"
#include "train/loss_scale.hpp"
#include "train/mode.hpp"
#include "train/checkpoint_lock.hpp"
#include "train/resume.hpp"

namespace hetrain::train {

struct Setup {
  Mode mode = Mode::Sync;                    // --mode, resolved once
  std::unique_ptr<BatchSource> train, val;
  bool augment = false;                      // training batches are augmented (TrainConfig::augments)
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<nn::BatchNormMode> batch_norm;     // --bn (the model points at it: it must not move)
  // Sums over the ranks that share a batch, when more than one does: --bn sync's statistics, a detector's
  // match counts (train/batch_stats.hpp).
  std::unique_ptr<BatchStatsExchange> batch_exchange;
  std::unique_ptr<data::EpochPlan> plan;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<optim::Sgd> sgd;
  std::unique_ptr<optim::WeightAverage> ema;  // --ema-decay: the moving average of the weights (sync mode)
  std::unique_ptr<dist::Communicator> comm;
  dist::Wire wire = dist::Wire::FP32;  // --reduce-precision: what the gradients cross between ranks as
  std::unique_ptr<dist::PowerSgd> powersgd;  // --compress powersgd:R (from step --compress-start)
  // With buckets: the communicator of PowerSGD's Q's, beside comm's P's, so both overlap backward (dist/powersgd.hpp)
  std::unique_ptr<dist::Communicator> powersgd_q_comm;
  std::unique_ptr<dist::BucketedReduction> buckets;  // sync with --bucket-mb > 0: reduced during backward (uses comm)
  std::unique_ptr<dist::Balancer> balancer;  // null with a fixed split
  dist::BalanceConfig balance_config;        // what the balancer was built from (caps are merged later)
  dist::SpeedEmulator emulator;
  std::vector<int64_t> fixed_split;          // empty unless --split
  int64_t total_steps = 0;
  Device device_kind = Device::CPU;          // where this rank's model and step run
  std::string device;  // for the rank table: "cpu (2 threads, oneDNN avx512_core)", "cuda:0 NVIDIA H200 (...)"
  int gpu_index = -1;                        // GPU ranks: the CUDA device this rank uses
  Precision precision = Precision::FP32;     // this rank's convolutions and dense layers (CPU ranks: FP32)
  LossScaler loss_scaler{false};             // active in fp16 jobs, on every rank (train/loss_scale.hpp)
  int64_t memory_cap = -1;                   // GPU ranks: the largest local batch that fits (-1: no cap)
  std::unique_ptr<DeviceInput> input, val_input;  // GPU ranks: batches to the device
  std::unique_ptr<ops::SoftmaxXentLoss> loss;     // classifiers: loss and accuracy on the rank's device
  std::unique_ptr<DetectionLoss> detection;       // detectors (model->detect_head()): YOLOv5's loss, any device
  int fail_rank = -1;                        // --debug-fail-at: injected failure
  int64_t fail_step = -1;
  int overflow_rank = -1;                    // --debug-overflow-at: injected overflow
  Tensor stats_before_step;  // running statistics before a step that may be skipped (train/shared_step.hpp)
  int64_t overflow_step = -1;
  int64_t start_step = 0;                    // the first step this process trains (> 0 after a resume)
  int64_t start_sample = 0;                  // async/hybrid: the first sample of the run's order it trains
  int64_t start_skip = 0;                    // sync: samples of the first step an async run already trained
  std::vector<std::string> notes;            // rank 0 prints these before training (print_notes)
  std::unique_ptr<CheckpointLock> checkpoint_lock;  // rank 0 with --checkpoint-dir: this job's folder
  std::vector<std::string> prunable_checkpoints;    // rank 0: earlier checkpoints this run continues
  std::vector<std::string> hosts;            // every rank's host, for messages
  std::unique_ptr<dist::StepArrival> arrival;  // the per-step agreement with its stall watchdog
  std::optional<LoadedCheckpoint> resume;    // rank 0, between reading and sharing it
};

// --groups of the hybrid mode: "node" and "speed" give {} (the groups follow the nodes, or measured
// speeds: train/elastic_group.cpp), else one group id per rank, each in [0, ranks). Throws on anything else.
std::vector<int> parse_groups(const std::string& text, int ranks);

// Rank 0: the notes, those that start with "warning:" on stderr (they are printed even with --quiet).
void print_notes(const std::vector<std::string>& notes);

// The data, model and run facts a checkpoint must match (train/resume.hpp).
RunIdentity run_identity(const TrainConfig& cfg, const Setup& s);

// What every mode's checkpoint says about the run at `global_step` (docs/checkpoint-format.md); the
// caller adds the split and the balancer's fits.
CheckpointInfo checkpoint_info(const TrainConfig& cfg, const Setup& s, int64_t global_step, int world_size);

// --device: `cpu`; `cuda` = the GPU of this rank's node-local rank, an error without one; `auto` = that GPU
// when one answers, else the CPU (rank 0 says why in one line unless quiet). Sets device_kind, device, gpu_index.
void resolve_device(const std::string& requested, int threads, bool quiet, const dist::World& world, Setup& s);

// Validates every input on every rank, then agrees across ranks: if any rank found a problem, every rank
// throws AgreedError with the message of the lowest failing rank, so rank 0 reports one line and no rank
// is left waiting. Then checks that all ranks parsed the same configuration and start from identical
// parameters.
Setup make_setup(const TrainConfig& config, dist::World& world);

}  // namespace hetrain::train
