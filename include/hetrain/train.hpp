// hetrain/train.hpp — the entry points of `hetrain train` (every mode: --mode sync, async, hybrid) and
// `hetrain eval`, and their configuration.
//
// Sync mode's step is the data flow of docs/architecture.md: EpochPlan slice → prefetch → forward/backward on
// the local b_r samples → gradients scaled by b_r/B and sum-allreduced → identical SGD step on every rank →
// balancer records compute time and, at agreed steps, re-fits the split. The asynchronous modes are in
// docs/architecture.md, "Training modes".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/precision.hpp"

namespace hetrain::train {

// Exit status of a run that a stop signal (SIGTERM, SIGUSR1, SIGINT) ended early after writing its
// checkpoint (sysexits' EX_TEMPFAIL): `--resume auto` continues it; jobs/train.sbatch requeues on it.
constexpr int kExitStoppedForResume = 75;
// Exit status of a run that a stop signal ended early with no checkpoint written (no --checkpoint-dir):
// there is nothing to continue from, so a requeueing script must not take it for 75.
constexpr int kExitStoppedWithoutCheckpoint = 76;

struct TrainConfig {
  // data
  std::string data_path;          // HDF5 dataset (or shard index); empty with synthetic > 0
  std::string val_path;           // optional validation dataset
  int64_t synthetic = 0;          // > 0: train on this many in-memory synthetic samples instead
  int64_t synthetic_val = 0;      // held-out synthetic samples for validation (same generator)
  std::vector<int> synthetic_shape = {3, 32, 32};  // C, H, W of synthetic images
  int synthetic_classes = 10;
  // --augment: classifiers get a random crop (pad 4) + horizontal flip. Detectors are augmented without it
  // (detect_augment, YOLOv5's recipe) unless --no-augment.
  bool augment = false;
  bool resized_crop = false;      // --augment rrc: RandomResizedCrop + flip instead of the crop and flip
  bool no_augment = false;
  data::DetectAugment detect_augment;
  // Whether training batches of a model of this kind are augmented.
  bool augments(bool detector) const { return !no_augment && (augment || detector); }
  int prefetch_depth = 2;
  int decode_threads = 0;         // JPEG datasets: threads per rank that decode a batch (0 = --threads)
  bool node_cache = false;        // hold the dataset in memory once per node (MPI shared-memory window)
  std::string last_batch = "drop";  // drop | partial

  // model and optimisation
  std::string model = "resnet20";
  int64_t global_batch = 128;
  // --accumulate N: each update averages the gradients of N consecutive global batches (sync mode): a step
  // (of the schedule, the checkpoints, --max-steps) is then N × global_batch samples.
  int64_t accumulate = 1;
  int64_t step_batch() const { return global_batch * accumulate; }
  int epochs = 1;
  int64_t max_steps = 0;          // > 0: train this many steps; the LR schedule is fitted to them
  int64_t stop_at_step = 0;       // > 0: end after this global step as if preempted; the schedule is the full run's
  float lr = 0.1f;
  bool linear_scaling = false;
  float warmup_epochs = 0.0f;
  int64_t warmup_min_steps = 0;     // the warm-up lasts at least this many steps (YOLOv5: 100)
  float warmup_bias_lr = 0.0f;      // > 0: the bias group's lr starts this much above the weights' (YOLOv5: 0.1)
  float warmup_momentum = -1.0f;    // >= 0: the momentum rises from this to --momentum (YOLOv5: 0.8)
  std::string schedule = "cosine";  // cosine | step | constant
  std::vector<int> milestones;      // epochs, for schedule=step
  float gamma = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 5e-4f;
  bool decay_bn_and_bias = true;
  float label_smoothing = 0.0f;
  float ema_decay = 0.0f;           // > 0: validate and checkpoint a moving average of the weights (YOLOv5: 0.9999)
  float ema_ramp = 2000.0f;         // its decay's ramp in updates, decay·(1 − exp(−updates/ramp))
  std::string batch_norm = "local";  // --bn: local | sync | ghost:G (docs/architecture.md, "Batch norm")
  uint64_t seed = 1;
  int threads = 1;
  std::string device = "auto";     // auto | cpu | cuda (may differ per rank: a job can mix CPU and GPU ranks)
  Precision precision = Precision::FP32;  // GPU ranks' convolutions and dense layers (docs/precision.md)

  // distribution and balancing
  std::string mode = "sync";        // sync | async | hybrid (docs/architecture.md, "Training modes")
  std::string groups = "node";      // hybrid: node | a group id per rank, "0,0,1,1"
  float elastic_alpha = 0.2f;       // async/hybrid: delta = alpha (local - center)
  int elastic_every = 1;            // async/hybrid: tau, local steps between trades with the center
  int64_t local_batch = 0;          // async/hybrid: samples per local step (0 = global_batch / ranks)
  std::string balance = "dynamic";  // none | static | dynamic
  int rebalance_every = 20;
  std::string max_local_batch;      // "" | one value | comma list, one per rank
  std::string emulate_speed;        // "1,1,0.5,0.25"
  std::string emulate_schedule;     // "STEP:RANK:SPEED,..."
  std::string fixed_split;          // "5,0,17,10": this exact split every step, no balancing (tests)
  double bucket_mb = 25;            // sync: gradient buckets of about this many MiB reduced during backward; 0 = one after
  std::string hierarchical = "auto";  // auto | on | off: reduce inside nodes first, then across (docs/architecture.md)
  std::string reduce_precision = "fp32";  // fp32 | bf16 | fp16: what gradients cross between ranks as (dist/wire.hpp)
  std::string compress = "none";    // none | powersgd:R: low-rank gradient compression (dist/powersgd.hpp)
  int64_t compress_start = 0;       // --compress applies from this step on; the steps before reduce whole

  // checkpoints and resume (docs/checkpoint-format.md)
  std::string checkpoint_dir;       // where rank 0 writes checkpoint-SSSSSSSS.h5; empty = no checkpoints
  int64_t checkpoint_every = 0;     // steps between checkpoints; 0 = by time only
  double checkpoint_minutes = 30;   // minutes between checkpoints; 0 = by steps only
  int keep_checkpoints = 3;         // newest checkpoints kept
  std::string resume;               // "" | "auto" (newest usable in checkpoint_dir) | a checkpoint file
  std::string init_from;            // a checkpoint or weights file: its weights only, a new run (train/init_weights.hpp)
  double stall_timeout = 300;       // seconds a rank may be missing from a step before the job ends; 0 = none

  // reporting
  int log_every = 10;
  int64_t val_every_samples = 0;    // > 0: validate also every this many samples (time-to-accuracy curves)
  std::string metrics_path;         // JSON lines, one per step
  bool debug_consistency = false;   // checksum parameters on all ranks after every step
  std::string dump_params;          // write final parameters (raw float32, flat order); %r = rank
  std::string dump_samples;         // write "epoch index" of every sample this rank trained on; %r = rank
  bool quiet = false;
  std::string debug_fail_at;        // "RANK:STEP": that rank throws at that step (tests the no-hang path)
  std::string debug_overflow_at;    // "RANK:STEP": that rank's loss gradient is multiplied by Inf at that step

  // The effective configuration as `hetrain train --print-config` writes it (config-file syntax); stored in
  // checkpoints. Empty when the configuration did not come from the command line (canonical() is used).
  std::string config_text;
  std::string config_path;  // --config FILE: an input, which no output may replace (not part of canonical())

  // Canonical "key=value" lines; every rank must produce the same text (checked at start-up).
  std::string canonical() const;
};

struct TrainResult {
  double final_loss = 0;        // mean training loss of the last logged window
  double val_accuracy = -1;     // last validation accuracy (mAP@0.5 for a detector), -1 when no validation set
  double samples_per_second = 0;  // over the timed steps (after the first, which warms up)
  int64_t steps = 0;            // global steps completed (a resumed run counts from the start of training)
  bool stopped_by_signal = false;  // SIGTERM, SIGUSR1 or SIGINT ended the run early
  bool stop_checkpointed = false;  // ... and its stop checkpoint was written (with --checkpoint-dir)
};

// Parses "5,0,17,10" into integers; `option` names the flag in errors.
std::vector<int64_t> parse_int_list(const std::string& text, const char* option);

// Runs training on MPI_COMM_WORLD (MPI must be initialised) in config.mode. Throws hetrain::Error on bad input.
TrainResult run_training(const TrainConfig& config);

// `hetrain eval`: a checkpoint's model on a dataset, every rank a contiguous share.
struct EvalConfig {
  std::string checkpoint;           // a checkpoint file, or:
  std::string weights;              // a weights file (data_tools/torch_to_hetrain.py) of `model`, for `data_path`
  std::string model;
  std::string data_path;            // HDF5 dataset, or:
  int64_t synthetic = 0;            // N synthetic samples of the checkpoint's shape and classes (--seed)
  uint64_t seed = 1;
  int64_t batch = 256;              // samples per forward pass on each rank
  int threads = 1;
  std::string device = "auto";
  std::string dump_batch;           // rank 0 writes its first batch's inputs, labels and logits (HDF5)
  std::string save_json;            // a detector's detections as COCO results (JSON), boxes in the original images
  bool quiet = false;
};
struct EvalResult {
  double loss = 0, top1 = 0, top5 = -1;  // top5 = -1 with fewer than 5 classes; top1 = -1 for a detector
  double map50 = -1, map50_95 = -1;      // a detector's COCO mAP (docs/detection.md); -1 for a classifier
  int64_t samples = 0;
};
EvalResult run_evaluation(const EvalConfig& config);

}  // namespace hetrain::train
