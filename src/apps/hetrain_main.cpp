// hetrain — heterogeneity-aware data-parallel training. Thin main: parse, start MPI, run, report errors.
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/train.hpp"
#include "train/options.hpp"

// Set by the Makefile for this file (VERSION, git describe, the configuration built).
#ifndef HETRAIN_VERSION
#define HETRAIN_VERSION "unknown"
#endif
#ifndef HETRAIN_GIT
#define HETRAIN_GIT "unknown"
#endif
#ifndef HETRAIN_BUILD_CONFIG
#define HETRAIN_BUILD_CONFIG "unknown"
#endif

namespace po = boost::program_options;
using hetrain::train::TrainConfig;
using hetrain::train::TrainResult;

namespace {

// Before MPI starts we only know our rank from the launcher's environment; used to print errors once.
int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

// Exit status 2 (a bad command line), which every rank finds alone. Rank 0 prints the line; the others
// give it time to before they exit: mpirun ends the whole job at the first non-zero exit, and on a busy
// machine that was often before rank 0 had printed anything.
int command_line_error() {
  if (launcher_rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(5));
  return 2;
}

const char* kUsage =
    "hetrain — data-parallel training on clusters of unlike GPUs (and CPUs).\n"
    "\n"
    "Usage:\n"
    "  hetrain train [options]          train a model (run under mpirun/srun for several ranks)\n"
    "  hetrain eval [options]           evaluate a checkpoint on a dataset (loss, top-1, top-5; mAP for a detector)\n"
    "  hetrain report METRICS.jsonl... -o report.png|.html   plots of a run's --metrics (or several runs')\n"
    "  hetrain models                   list the model zoo and the shipped YAML models with parameter counts\n"
    "  hetrain models --show FILE.yaml  a YAML model's layers: inputs, repeats, parameters, output shapes\n"
    "  hetrain devices                  list the GPUs this process sees (or why it sees none: exit 3)\n"
    "  hetrain --help | train --help    this text / every training option (eval --help: evaluation)\n"
    "  hetrain --version                version, git commit and the configuration built\n"
    "\n"
    "Examples:\n"
    "  hetrain train --model resnet20 --synthetic 2048 --global-batch 64 --epochs 2\n"
    "  mpirun -n 4 hetrain train --data train.h5 --val test.h5 --model lenet --global-batch 256 \\\n"
    "      --balance dynamic --emulate-speed 1,1,0.5,0.25\n"
    "  srun -n 8 hetrain train --data imagenet/index.h5 --model resnet50 --global-batch 512 \\\n"
    "      --checkpoint-dir ckpt --resume auto\n"
    "  hetrain eval --checkpoint ckpt/checkpoint-00001000.h5 --data test.h5\n"
    "  hetrain train --model models/yolov5n.yaml --data detect-train.h5 --val detect-test.h5 --lr 0.01 \\\n"
    "      --momentum 0.937 --epochs 30        (a detector, augmented as YOLOv5: docs/detection.md)\n"
    "\n"
    "Exit status: 0 done; 1 error; 2 bad command line; 75 stopped by SIGTERM/SIGUSR1/SIGINT after writing a\n"
    "checkpoint (continue with --resume auto); 76 stopped by one without a checkpoint (no --checkpoint-dir).\n"
    "Datasets are HDF5 files made by hetrain-pack\n"
    "(docs/dataset-format.md); checkpoints are described in docs/checkpoint-format.md.\n";

// The options that reach TrainConfig only after a conversion (lists, the precision, negated switches).
struct RawTrainOptions {
  std::string shape, milestones, precision, augment;
  bool no_bn_decay = false, tf32 = false, verbose = false;
};

const char* kVerboseHelp = "error messages also name the source file and line that raised them (for a bug report)";

// The line a failed rank prints. The source location is for developers: only --verbose adds it (an
// internal error's text carries it already, src/core/error.cpp).
std::string error_text(const std::exception& e, bool verbose) {
  std::string text = e.what();
  const auto* error = dynamic_cast<const hetrain::Error*>(&e);
  if (!verbose || !error) return text;
  const char* slash = std::strrchr(error->file(), '/');
  const std::string at = std::string(" [") + (slash ? slash + 1 : error->file()) + ":" + std::to_string(error->line()) + "]";
  if (text.size() < at.size() || text.compare(text.size() - at.size(), at.size(), at) != 0) text += at;
  return text;
}

// Options that only mean something next to another option (a mode, a schedule, a folder, ...). Set to anything
// but their default where that other option is not so, they are refused, as a usage error: the run would not
// do what was asked (docs/config-file.md, "Options that need another"). One row per option and need; the
// first row a run breaks is the one reported.
struct OptionNeed {
  const char* name;                 // the option, refused when given with a value other than its default
  const char* key;                  // the option it needs
  std::vector<std::string> values;  // key's values it applies to (the others are refused) | empty: key must be given
  const char* why = "";             // for a key that must be given: what it is, in words ("where they go")
  const char* alternative = "";     // another option that does as well as key (--synthetic-val for --val)
};
const std::vector<std::string> kModes = {"sync", "async", "hybrid"};
const OptionNeed kOptionNeeds[] = {
    {"groups", "mode", {"hybrid"}},
    {"elastic-alpha", "mode", {"async", "hybrid"}},
    {"elastic-every", "mode", {"async", "hybrid"}},
    {"local-batch", "mode", {"async", "hybrid"}},
    {"balance", "mode", {"sync", "hybrid"}},
    {"rebalance-every", "mode", {"sync", "hybrid"}},
    {"rebalance-every", "balance", {"static", "dynamic"}},
    {"split", "mode", {"sync"}},
    {"stop-at-step", "mode", {"sync"}},
    {"bucket-mb", "mode", {"sync"}},
    {"compress", "mode", {"sync"}},
    {"compress-start", "mode", {"sync"}},
    {"milestones", "schedule", {"step"}},
    {"gamma", "schedule", {"step"}},
    {"checkpoint-every", "checkpoint-dir", {}, "the folder checkpoints go to"},
    {"checkpoint-minutes", "checkpoint-dir", {}, "the folder checkpoints go to"},
    {"keep-checkpoints", "checkpoint-dir", {}, "the folder checkpoints go to"},
    {"ema-ramp", "ema-decay", {}, "the moving average it ramps up"},
    {"val-every-samples", "val", {}, "the data it validates on", "synthetic-val"},
};
// The values each key of a value row may take; a value outside them is left for the trainer to name.
const std::vector<std::string>& known_values(const std::string& key) {
  static const std::vector<std::string> schedules = {"cosine", "step", "constant"},
                                        balances = {"none", "static", "dynamic"}, none;
  return key == "mode" ? kModes : key == "schedule" ? schedules : key == "balance" ? balances : none;
}

std::string one_or_two(const std::vector<std::string>& v) {
  return v.size() == 1 ? v[0] : v.size() == 2 ? v[0] + " and " + v[1] : v[0] + ", " + v[1] + " and " + v[2];
}

// Throws the first row of kOptionNeeds this configuration breaks, and the augmentation options that
// contradict --no-augment.
void refuse_options_without_their_needs(const po::options_description& opts, const po::variables_map& vm,
                                        const TrainConfig& cfg) {
  using hetrain::train::differs_from_default;
  for (const OptionNeed& o : kOptionNeeds) {
    if (!differs_from_default(opts, vm, o.name)) continue;
    const std::string name = std::string("--") + o.name, key = std::string("--") + o.key;
    if (!o.values.empty()) {
      const std::string value = vm.count(o.key) ? vm[o.key].as<std::string>() : "";
      const auto& known = known_values(o.key);
      if (std::find(o.values.begin(), o.values.end(), value) != o.values.end() ||
          std::find(known.begin(), known.end(), value) == known.end())
        continue;
      throw std::runtime_error(name + " applies to " + key + " " + one_or_two(o.values) + " only, and this run is " +
                               key + " " + value + ": drop " + name + " or change " + key);
    }
    if (differs_from_default(opts, vm, o.key) || (*o.alternative && differs_from_default(opts, vm, o.alternative)))
      continue;
    const std::string either = *o.alternative ? key + " or --" + o.alternative : key;
    throw std::runtime_error(name + " needs " + either + " (" + o.why + "), and this run has " +
                             (*o.alternative ? "neither" : "none") + ": give " + either + " or drop " + name);
  }
  if (!cfg.no_augment) return;
  for (const char* a : {"mosaic", "affine-scale", "affine-translate", "hsv-h", "hsv-s", "hsv-v", "fliplr"})
    if (differs_from_default(opts, vm, a) && vm[a].as<float>() != 0)
      throw std::runtime_error(std::string("--") + a + " asks for an augmentation, and --no-augment turns every "
                               "augmentation off: give one of them");
}

// --augment's value: crop (also what a bare --augment and a config file's "augment = true" mean) or rrc.
void parse_augment(const std::string& value, TrainConfig& cfg) {
  std::string v = value;
  for (char& ch : v) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (v.empty() || v == "false" || v == "no" || v == "off" || v == "0") return;
  if (v == "rrc") {
    cfg.augment = cfg.resized_crop = true;
    return;
  }
  if (v != "crop" && v != "true" && v != "yes" && v != "on" && v != "1")
    throw po::error("--augment takes crop (random crop + flip; the default) or rrc (RandomResizedCrop + flip), got '" +
                    value + "'");
  cfg.augment = true;
}

po::options_description data_options(TrainConfig& c, RawTrainOptions& raw) {
  po::options_description data("Data");
  data.add_options()
      ("data", po::value(&c.data_path), "training dataset: an HDF5 file or shard index made by hetrain-pack")
      ("val", po::value(&c.val_path), "validation dataset, evaluated after every epoch (async/hybrid: the center)")
      ("val-every-samples", po::value(&c.val_every_samples)->default_value(0),
       "with --val or --synthetic-val: validate also every N training samples, a line 'validation at sample ... "
       "after T s of training' each (T leaves validation out)")
      ("synthetic", po::value(&c.synthetic), "train on N in-memory synthetic samples instead of --data")
      ("synthetic-val", po::value(&c.synthetic_val), "held-out synthetic samples for validation")
      ("synthetic-shape", po::value(&raw.shape)->default_value("3,32,32"), "C,H,W of synthetic images")
      ("synthetic-classes", po::value(&c.synthetic_classes)->default_value(10), "classes of synthetic data")
      ("augment", po::value(&raw.augment)->implicit_value("crop"),
       "augment a classifier's training data: --augment (= crop) by a random crop (4-pixel padding) and a "
       "horizontal flip, the CIFAR recipe | --augment rrc by RandomResizedCrop (8-100 % of the area, ratio "
       "3/4-4/3) and a flip, the ImageNet recipe (docs/augmentation.md). Detectors are augmented without it, as "
       "YOLOv5 is, by the next options (docs/detection.md, \"Augmentation\")")
      ("no-augment", po::bool_switch(&c.no_augment), "no augmentation at all, detectors included")
      ("mosaic", po::value(&c.detect_augment.mosaic)->default_value(1.0f, "1"),
       "detectors: probability that a training image becomes a mosaic of 4 (itself and 3 images drawn from the "
       "dataset by its seed, epoch and index); 0 turns mosaics off")
      ("affine-scale", po::value(&c.detect_augment.scale)->default_value(0.5f, "0.5"),
       "detectors: random zoom in [1 - S, 1 + S]; 0 turns it off")
      ("affine-translate", po::value(&c.detect_augment.translate)->default_value(0.1f, "0.1"),
       "detectors: random shift by up to T times the image's width and height; 0 turns it off")
      ("hsv-h", po::value(&c.detect_augment.hsv_h)->default_value(0.015f, "0.015"),
       "detectors: random hue gain in [1 - G, 1 + G] (--hsv-s saturation, --hsv-v value); 0 turns it off")
      ("hsv-s", po::value(&c.detect_augment.hsv_s)->default_value(0.7f, "0.7"), "detectors: saturation gain range")
      ("hsv-v", po::value(&c.detect_augment.hsv_v)->default_value(0.4f, "0.4"), "detectors: value gain range")
      ("fliplr", po::value(&c.detect_augment.fliplr)->default_value(0.5f, "0.5"),
       "detectors: probability of a left-right flip; 0 turns it off")
      ("prefetch", po::value(&c.prefetch_depth)->default_value(2), "batches read ahead by the background reader")
      ("decode-threads", po::value(&c.decode_threads)->default_value(0),
       "JPEG datasets (hetrain-pack folder --store jpeg): threads per rank that decode a batch while the model "
       "computes (0 = --threads)")
      ("cache", po::bool_switch(&c.node_cache), "hold the dataset in memory, one copy per node (MPI shared memory)")
      ("last-batch", po::value(&c.last_batch)->default_value("drop"), "last partial batch of an epoch: drop | partial");
  return data;
}

po::options_description model_options(TrainConfig& c, RawTrainOptions& raw) {
  po::options_description model("Model and optimisation");
  model.add_options()
      ("model", po::value(&c.model)->default_value("resnet20"),
       "mlp | lenet | resnet20 | resnet18 | resnet50, or a model file FILE.yaml in YOLOv5's format "
       "(models/yolov5n.yaml ...; docs/models.md); a model with a Detect layer trains on detection data")
      ("global-batch", po::value(&c.global_batch)->default_value(128), "samples per step over all ranks (B)")
      ("accumulate", po::value(&c.accumulate)->default_value(1),
       "average the gradients of N consecutive global batches before each update (a step is then N x B "
       "samples; memory as for B); async/hybrid: of a rank's (a group's) N consecutive local steps. YOLOv5 "
       "accumulates to a nominal batch of 64: --accumulate 64/B")
      ("epochs", po::value(&c.epochs)->default_value(1), "passes over the training data")
      ("max-steps", po::value(&c.max_steps)->default_value(0),
       "train only this many steps, the LR schedule fitted to them (0 = epochs x steps per epoch)")
      ("stop-at-step", po::value(&c.stop_at_step)->default_value(0),
       "end after this global step as if preempted: checkpoint written, LR schedule of the whole run (0 = off)")
      ("lr", po::value(&c.lr)->default_value(0.1f, "0.1"), "base learning rate")
      ("linear-scaling", po::bool_switch(&c.linear_scaling), "use lr × global-batch / 256 (linear scaling rule)")
      ("warmup-epochs", po::value(&c.warmup_epochs)->default_value(0.0f, "0"), "linear warm-up length in epochs")
      ("warmup-min-steps", po::value(&c.warmup_min_steps)->default_value(0),
       "the warm-up lasts at least this many steps, at most the run (YOLOv5: 100 with --warmup-epochs 3)")
      ("warmup-bias-lr", po::value(&c.warmup_bias_lr)->default_value(0.0f, "0"),
       "YOLOv5's warm-up: the biases' lr falls from this + lr to lr over the warm-up while the weights' rises "
       "from 0 (YOLOv5: 0.1; 0 = biases warm up like the weights)")
      ("warmup-momentum", po::value(&c.warmup_momentum)->default_value(-1.0f, "off"),
       "YOLOv5's warm-up: the momentum rises from this to --momentum over the warm-up (YOLOv5: 0.8)")
      ("schedule", po::value(&c.schedule)->default_value("cosine"), "after warm-up: cosine | step | constant")
      ("milestones", po::value(&raw.milestones), "step schedule: epochs at which lr is multiplied by --gamma, e.g. 30,60")
      ("gamma", po::value(&c.gamma)->default_value(0.1f, "0.1"), "step schedule factor")
      ("momentum", po::value(&c.momentum)->default_value(0.9f, "0.9"), "SGD momentum")
      ("nesterov", po::bool_switch(&c.nesterov), "Nesterov momentum")
      ("weight-decay", po::value(&c.weight_decay)->default_value(5e-4f, "5e-4"), "L2 weight decay")
      ("no-bn-decay", po::bool_switch(&raw.no_bn_decay), "no weight decay on batch-norm parameters and biases")
      ("label-smoothing", po::value(&c.label_smoothing)->default_value(0.0f, "0"), "label smoothing epsilon: a classifier's softmax targets; a detector's class targets 1-eps/2 and eps/2 "
       "(YOLOv5's smooth_BCE). Validation losses are unsmoothed")
      ("ema-decay", po::value(&c.ema_decay)->default_value(0.0f, "0"),
       "keep a moving average of the weights, decay·(1 - exp(-updates/--ema-ramp)) per update, and validate, "
       "checkpoint-evaluate and export it (YOLOv5: 0.9999; 0 = none; async/hybrid: of the center, per push)")
      ("ema-ramp", po::value(&c.ema_ramp)->default_value(2000.0f, "2000"), "the moving average's ramp in updates")
      ("bn", po::value(&c.batch_norm)->default_value("local"),
       "batch-norm statistics in training: local = over each rank's share (DDP's; they change with the split) | "
       "sync = over the whole global batch, summed across the ranks in every BN layer (any split trains what one "
       "process at the same batch trains) | ghost:G = over groups of G consecutive samples of "
       "the global batch, every share a multiple of G (no extra communication). async: over each rank's batch; "
       "hybrid: over the group's (docs/architecture.md)")
      ("seed", po::value(&c.seed)->default_value(1), "seed of initialisation, sample order and augmentation")
      ("threads", po::value(&c.threads)->default_value(1), "CPU threads per rank")
      ("device", po::value(&c.device)->default_value("auto"),
       "auto = the GPU of this rank's node-local rank when one answers, else the CPU (with a notice) | cpu | cuda")
      ("precision", po::value(&raw.precision)->default_value("fp32"),
       "GPU ranks' convolutions and dense layers: fp32 | tf32 (tensor cores, 10-bit mantissa products) | bf16 | "
       "fp16 (16-bit operands, FP32 accumulation; fp16 with dynamic loss scaling). Weights, optimizer, batch-norm "
       "statistics, loss and gradient reduction stay FP32; CPU ranks compute in FP32 (docs/precision.md)")
      ("tf32", po::bool_switch(&raw.tf32), "the older spelling of --precision tf32");
  return model;
}

po::options_description distribution_options(TrainConfig& c) {
  po::options_description dist("Distribution and load balancing");
  dist.add_options()
      ("mode", po::value(&c.mode)->default_value("sync"),
       "sync = every step a weighted allreduce of all ranks | async = each rank trains alone and trades with a "
       "shared center model (elastic averaging) | hybrid = sync inside each --groups group, async between groups")
      ("groups", po::value(&c.groups)->default_value("node"),
       "hybrid: node = the ranks of one node | speed = ranks of similar speed, measured at start-up | LIST = a "
       "group id per rank, e.g. 0,0,1,1")
      ("elastic-alpha", po::value(&c.elastic_alpha)->default_value(0.2f, "0.2"),
       "async/hybrid: the elastic pull alpha in (0, 1]: delta = alpha (local - center)")
      ("elastic-every", po::value(&c.elastic_every)->default_value(1),
       "async/hybrid: trade with the center every tau local steps")
      ("local-batch", po::value(&c.local_batch)->default_value(0),
       "async/hybrid: samples per local step on each rank (0 = --global-batch / ranks)")
      ("balance", po::value(&c.balance)->default_value("dynamic"),
       "none = uniform split (the DDP baseline) | static = calibrate once | dynamic = keep re-fitting "
       "(sync: the ranks' shares of B; hybrid: the members' shares of their group's claim)")
      ("rebalance-every", po::value(&c.rebalance_every)->default_value(20),
       "dynamic: re-fit every K steps (and early when a rank's speed changes); a new split is adopted only when "
       "its predicted gain beats the fits' noise bound (docs/architecture.md, \"Load balancing\")")
      ("max-local-batch", po::value(&c.max_local_batch), "cap on a rank's share: one value, or one per rank (a,b,c,...)")
      ("split", po::value(&c.fixed_split), "fixed per-rank split, e.g. 5,0,17,10 (sums to --global-batch; no balancing)")
      ("bucket-mb", po::value(&c.bucket_mb)->default_value(25.0),
       "sync: reduce gradients in buckets of about this many MiB, each started during backward as soon as its "
       "gradients are final (MPI and NCCL; GPU ranks of a mixed CPU/GPU job reduce them after backward) | 0 = one "
       "reduction after backward")
      ("hierarchical", po::value(&c.hierarchical)->default_value("auto"),
       "MPI reduction across nodes: on = reduce inside each node, allreduce between node leaders, broadcast "
       "inside each node | off = one flat allreduce | auto = on when the job spans >1 node, a node runs >1 rank and "
       "--bucket-mb is 0 (started buckets stay flat: measured faster)")
      ("reduce-precision", po::value(&c.reduce_precision)->default_value("fp32"),
       "what gradients cross between ranks as: fp32 | bf16 | fp16 = each rank's weighted gradient rounded to 16 "
       "bits, summed in FP32 and rounded once more: 16-bit messages, the update and weights stay FP32 "
       "(fp16 overflows above 65504; docs/architecture.md, \"16-bit transport\"). In --mode async and hybrid "
       "also the trades with the center: reads and pushes in 16 bits, the center in FP32 (\"16-bit center "
       "trades\")")
      ("compress", po::value(&c.compress)->default_value("none"),
       "none | powersgd:R = send each weight matrix's gradient as rank-R factors with error feedback (PowerSGD, "
       "as PyTorch DDP's hook; biases and batch norm whole), after backward instead of in buckets: far fewer "
       "bytes for slow links (CPU ranks; docs/architecture.md, \"PowerSGD\")")
      ("compress-start", po::value(&c.compress_start)->default_value(0),
       "--compress from step K on; the steps before reduce whole gradients (a warm-up, as PowerSGD's authors "
       "advise: about a tenth of the run)")
      ("emulate-speed", po::value(&c.emulate_speed),
       "EMULATE unequal ranks: relative speeds in (0,1], one per rank (rank r sleeps (1/s-1)x the time its device "
       "computed: CPU time on a CPU rank; the first step and steps that build kernels are not emulated)")
      ("emulate-schedule", po::value(&c.emulate_schedule), "change emulated speeds mid-run: STEP:RANK:SPEED[,...]");
  return dist;
}

po::options_description checkpoint_options(TrainConfig& c) {
  po::options_description ckpt("Checkpoints, resume and failures (docs/checkpoint-format.md)");
  ckpt.add_options()
      ("checkpoint-dir", po::value(&c.checkpoint_dir), "rank 0 writes DIR/checkpoint-SSSSSSSS.h5 there (created if missing)")
      ("checkpoint-every", po::value(&c.checkpoint_every)->default_value(0), "a checkpoint every N steps (async/hybrid: N x global-batch samples; 0 = by time only)")
      ("checkpoint-minutes", po::value(&c.checkpoint_minutes)->default_value(30.0),
       "a checkpoint every M minutes (0 = by steps only); always one at the end and on a stop signal")
      ("keep-checkpoints", po::value(&c.keep_checkpoints)->default_value(3), "newest checkpoints kept in --checkpoint-dir")
      ("resume", po::value(&c.resume),
       "auto = continue from the newest checkpoint in --checkpoint-dir that verifies (fresh start if none) | FILE")
      ("init-from", po::value(&c.init_from),
       "start a new run from the weights of FILE: a hetrain checkpoint (its moving average when it has one) or a "
       "weights file from data_tools/torch_to_hetrain.py (e.g. YOLOv5's yolov5s.pt); tensors matched by name and "
       "shape, the others keep their initialisation; fresh schedule and optimizer")
      ("stall-timeout", po::value(&c.stall_timeout)->default_value(300.0),
       "seconds a rank may be missing from a step (async/hybrid: make no local step) before the job ends "
       "naming it (0 = wait forever)");
  return ckpt;
}

po::options_description output_options(TrainConfig& c, RawTrainOptions& raw) {
  po::options_description out("Output");
  out.add_options()
      ("log-every", po::value(&c.log_every)->default_value(10), "progress line every N steps")
      ("metrics", po::value(&c.metrics_path), "per-step JSON lines (each rank's b, compute, wait, comm, idle and exposed-comm seconds, "
       "resident and GPU memory; async/hybrid: every --log-every local steps of rank 0, each rank's and group's samples/s "
       "and staleness; docs/report.md)")
      ("debug-consistency", po::bool_switch(&c.debug_consistency), "check parameters are identical on all ranks every step")
      ("dump-params", po::value(&c.dump_params), "write final parameters as raw float32 (%r = rank)")
      ("dump-samples", po::value(&c.dump_samples), "write 'epoch index' of every sample trained on (%r = rank)")
      ("quiet", po::bool_switch(&c.quiet), "no progress output")
      ("debug-fail-at", po::value(&c.debug_fail_at), "testing aid: rank RANK fails at step STEP (RANK:STEP)")
      ("debug-overflow-at", po::value(&c.debug_overflow_at),
       "testing aid: rank RANK's loss gradient is multiplied by Inf at step STEP (RANK:STEP; async/hybrid: its "
       "local step), as an FP16 overflow would make it")
      ("config", po::value<std::string>(),
       "read options from this file: 'key = value' lines named like the long options, '#' comments, \"quoted\" "
       "values (docs/config-file.md); the command line overrides it")
      ("print-config", "print the effective configuration in --config syntax and exit (repeat a run exactly)")
      ("verbose", po::bool_switch(&raw.verbose), kVerboseHelp)
      ("help,h", "show this help");
  return out;
}

po::options_description train_options(TrainConfig& c, RawTrainOptions& raw) {
  po::options_description all("hetrain train options");
  all.add(data_options(c, raw)).add(model_options(c, raw)).add(distribution_options(c));
  all.add(checkpoint_options(c)).add(output_options(c, raw));
  return all;
}

std::vector<int> parse_ints(const std::string& text, const char* option) {
  std::vector<int> out;
  for (int64_t v : hetrain::train::parse_int_list(text, option)) out.push_back(static_cast<int>(v));
  return out;
}

int cmd_models(int argc, char** argv) {
  if (argc >= 2) {  // hetrain models --show FILE.yaml [--size H[,W]] [--classes N] [--channels C]
    std::string file, size = "640";
    hetrain::nn::ModelConfig mc;
    mc.in_channels = 0, mc.num_classes = 0;  // 0: the file's `ch` and `nc`
    po::options_description show("hetrain models --show options");
    show.add_options()("show", po::value(&file)->required(), "a model file in YOLOv5's format (docs/models.md)")(
        "size", po::value(&size)->default_value("640"), "input height[,width] the shapes are shown for")(
        "classes", po::value(&mc.num_classes)->default_value(0), "classes (0: the file's nc)")(
        "channels", po::value(&mc.in_channels)->default_value(0), "input channels (0: the file's ch, else 3)");
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(show).run(), vm);  // argv[0] is "models"
    po::notify(vm);
    const std::vector<int> hw = parse_ints(size, "--size");
    HT_CHECK(!hw.empty() && hw.size() <= 2, "--size wants H or H,W, got ", hetrain::quoted(size));
    mc.name = file;
    mc.height = hw[0];
    mc.width = hw.size() == 2 ? hw[1] : hw[0];
    std::fputs(hetrain::nn::describe_graph_model(file, mc).c_str(), stdout);
    return 0;
  }
  std::printf("%-10s %12s   %s\n", "model", "parameters", "for input, classes");
  for (const std::string& name : hetrain::nn::Model::names()) {
    hetrain::nn::ModelConfig mc;
    mc.name = name;
    const bool small = name == "mlp" || name == "lenet";
    mc.in_channels = small ? 1 : 3;
    mc.height = mc.width = small ? 28 : (name == "resnet20" ? 32 : 224);
    mc.num_classes = small || name == "resnet20" ? 10 : 1000;
    std::printf("%-10s %12lld   %dx%dx%d, %d\n", name.c_str(), (long long)hetrain::nn::Model::create(mc)->param_count(),
                mc.in_channels, mc.height, mc.width, mc.num_classes);
  }
  std::printf("Every model takes any channel count, class count and image size from its minimum up.\n"
              "Models can also be files in YOLOv5's YAML format (--model FILE.yaml; docs/models.md): models/ holds\n"
              "yolov5n/s/m.yaml (detectors) and the zoo's classifiers; hetrain models --show FILE.yaml lists one's layers.\n");
  return 0;
}

// Exit status 0 when at least one GPU answers; 3 when the query ran and found none (the reason is printed);
// 1 on an error. Scripts skip GPU tests on 3 only: anything else (a crash, a missing binary) is a failure
// that must not pass for "no GPU here" (test/e2e/train_gpu.sh).
constexpr int kNoGpuStatus = 3;
int cmd_devices() {
  const int n = hetrain::cuda_device_count();
  if (n == 0) {
    std::printf("%s\n", hetrain::cuda_status().c_str());
    return kNoGpuStatus;
  }
  for (int i = 0; i < n; ++i) {
    const hetrain::CudaDeviceInfo d = hetrain::cuda_device_info(i);
    std::printf("cuda:%d  %s  sm_%d%d  %.1f GiB (%.1f GiB free)\n", i, d.name.c_str(), d.cc_major, d.cc_minor,
                double(d.total_bytes) / double(1 << 30), double(d.free_bytes) / double(1 << 30));
  }
  return 0;
}

// A negative sample count is a mistake on the command line (exit 2), not a missing data source.
void check_sample_count(int64_t n, const char* option) {
  if (n < 0) throw po::error(std::string(option) + " must be a positive number of samples, got " + std::to_string(n));
}

int cmd_train(int argc, char** argv) {
  TrainConfig cfg;
  RawTrainOptions raw;
  po::options_description opts = train_options(cfg, raw);
  po::variables_map vm;
  try {
    hetrain::train::parse_command_line(argc, argv, opts, vm);
    if (vm.count("help")) {
      std::cout << "Usage: hetrain train [options]\n\n" << opts << "\n";
      return 0;
    }
    if (vm.count("config")) {
      cfg.config_path = vm["config"].as<std::string>();
      hetrain::train::parse_config_file(cfg.config_path, opts, vm);
    }
    po::notify(vm);
    refuse_options_without_their_needs(opts, vm, cfg);
    check_sample_count(cfg.synthetic, "--synthetic");
    if (cfg.synthetic_val < 0)
      throw po::error("--synthetic-val must not be negative, got " + std::to_string(cfg.synthetic_val));
    cfg.synthetic_shape = parse_ints(raw.shape, "--synthetic-shape");
    if (!raw.milestones.empty()) cfg.milestones = parse_ints(raw.milestones, "--milestones");
    cfg.decay_bn_and_bias = !raw.no_bn_decay;
    parse_augment(raw.augment, cfg);
    if (cfg.augment && cfg.no_augment) throw std::runtime_error("--augment and --no-augment contradict each other: give one");
    cfg.detect_augment.check();
    cfg.precision = hetrain::parse_precision(raw.precision, "--precision");
    if (raw.tf32) {
      if (!vm["precision"].defaulted() && cfg.precision != hetrain::Precision::TF32)
        throw std::runtime_error("--tf32 (the older spelling of --precision tf32) contradicts --precision " +
                                 raw.precision + ": give only --precision");
      cfg.precision = hetrain::Precision::TF32;
      if (launcher_rank() == 0)
        std::fprintf(stderr, "hetrain: note: --tf32 is the older spelling of --precision tf32; use that instead\n");
    }
    // The alias is written out as what it means, so the printed configuration repeats the run without it.
    cfg.config_text = hetrain::train::effective_config(opts, vm, {"help", "config", "print-config", "tf32", "verbose"});
    // The whole line: "reduce-precision = fp32" ends the same way.
    const std::string fp32_line = "\nprecision = fp32\n";
    const size_t at = ("\n" + cfg.config_text).find(fp32_line);
    if (cfg.precision == hetrain::Precision::TF32 && at != std::string::npos)
      cfg.config_text.replace(at, fp32_line.size() - 1, "precision = tf32\n");
    if (vm.count("print-config")) {
      if (launcher_rank() == 0) std::fputs(cfg.config_text.c_str(), stdout);
      return 0;
    }
  } catch (const std::exception& e) {  // boost's messages name the option
    if (launcher_rank() == 0) std::fprintf(stderr, "hetrain: error: %s (see hetrain train --help)\n", e.what());
    return command_line_error();
  }

  hetrain::set_error_locations(raw.verbose);
  auto& world = hetrain::dist::World::init(&argc, &argv);
  int status = 0;
  try {
    const TrainResult result = hetrain::train::run_training(cfg);
    if (result.stopped_by_signal)
      status = result.stop_checkpointed ? hetrain::train::kExitStoppedForResume
                                        : hetrain::train::kExitStoppedWithoutCheckpoint;
  } catch (const hetrain::AgreedError& e) {  // every rank has it; rank 0 reports, all exit cleanly
    if (world.rank() == 0) std::fprintf(stderr, "hetrain: error: %s\n", e.message().c_str());
    world.finalize();
    return 1;
  } catch (const std::exception& e) {  // this rank alone: report and end the whole job
    world.abort("hetrain: error: " + error_text(e, raw.verbose), 1);
  }
  world.finalize();
  return status;
}

int cmd_eval(int argc, char** argv) {
  hetrain::train::EvalConfig cfg;
  bool verbose = false;
  po::options_description opts("hetrain eval options");
  opts.add_options()
      ("checkpoint", po::value(&cfg.checkpoint), "checkpoint file written by hetrain train")
      ("weights", po::value(&cfg.weights),
       "instead of --checkpoint: a weights file (data_tools/torch_to_hetrain.py) of the --model, evaluated on --data")
      ("model", po::value(&cfg.model), "with --weights: the model (as hetrain train --model); the input shape and "
       "classes are --data's")
      ("data", po::value(&cfg.data_path), "HDF5 dataset made by hetrain-pack")
      ("synthetic", po::value(&cfg.synthetic)->default_value(0),
       "evaluate on N synthetic samples of the checkpoint's shape and classes instead of --data")
      ("seed", po::value(&cfg.seed)->default_value(1), "seed of the synthetic samples")
      ("batch", po::value(&cfg.batch)->default_value(256), "samples per forward pass on each rank")
      ("threads", po::value(&cfg.threads)->default_value(1), "CPU threads per rank")
      ("device", po::value(&cfg.device)->default_value("auto"), "auto | cpu | cuda, as for hetrain train")
      ("dump-batch", po::value(&cfg.dump_batch),
       "write rank 0's first batch (inputs as the model saw them, labels, and the outputs as /logits: a "
       "classifier's [n, K], a detector's head rows [n, A, 5 + nc]) to this HDF5 file")
      ("save-json", po::value(&cfg.save_json),
       "a detector: write its detections to this file as COCO results (image_id, category_id, bbox in the "
       "original image's pixels, score), for pycocotools (docs/detection.md)")
      ("quiet", po::bool_switch(&cfg.quiet), "only the result line")
      ("verbose", po::bool_switch(&verbose), kVerboseHelp)
      ("help,h", "show this help");
  try {
    po::variables_map vm;
    hetrain::train::parse_command_line(argc, argv, opts, vm);
    if (vm.count("help")) {
      std::cout << "Usage: hetrain eval --checkpoint FILE (--data FILE | --synthetic N) [options]\n"
                   "       hetrain eval --weights FILE --model NAME --data FILE [options]\n"
                << "Prints loss, top-1 and (with at least 5 classes) top-5 accuracy over every sample; run under\n"
                << "mpirun/srun to share the samples among ranks.\n\n"
                << opts << "\n";
      return 0;
    }
    po::notify(vm);
    check_sample_count(cfg.synthetic, "--synthetic");
    if (vm.count("save-json") && cfg.save_json.empty())
      throw po::error("--save-json needs a file name (where the detections go), got an empty one");
  } catch (const std::exception& e) {
    if (launcher_rank() == 0) std::fprintf(stderr, "hetrain: error: %s (see hetrain eval --help)\n", e.what());
    return command_line_error();
  }
  hetrain::set_error_locations(verbose);
  auto& world = hetrain::dist::World::init(&argc, &argv);
  try {
    hetrain::train::run_evaluation(cfg);
  } catch (const hetrain::AgreedError& e) {
    if (world.rank() == 0) std::fprintf(stderr, "hetrain: error: %s\n", e.message().c_str());
    world.finalize();
    return 1;
  } catch (const std::exception& e) {
    world.abort("hetrain: error: " + error_text(e, verbose), 1);
  }
  world.finalize();
  return 0;
}

// `hetrain report`: the plotting tool is Python (matplotlib); it lives beside the docs of an installed
// hetrain (PREFIX/share/hetrain/tools) or in data_tools/ of the source tree.
int cmd_report(int argc, char** argv, const char* self) {
  char exe[4096] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string bin_dir = n > 0 ? std::string(exe, size_t(n)) : std::string(self);
  bin_dir = bin_dir.substr(0, bin_dir.rfind('/') == std::string::npos ? 0 : bin_dir.rfind('/'));
  std::string script;
  for (const std::string& candidate : {bin_dir + "/../share/hetrain/tools/hetrain_report.py",
                                       bin_dir + "/../../data_tools/hetrain_report.py"})
    if (::access(candidate.c_str(), R_OK) == 0) {
      script = candidate;
      break;
    }
  if (script.empty()) {
    std::fprintf(stderr, "hetrain report: error: hetrain_report.py not found beside %s (reinstall hetrain)\n",
                 bin_dir.c_str());
    return 1;
  }
  std::vector<char*> args = {const_cast<char*>("/usr/bin/python3"), script.data()};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "hetrain report: error: cannot run /usr/bin/python3 (%s): run make deps\n", std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "train") return cmd_train(argc - 1, argv + 1);
  if (cmd == "eval") return cmd_eval(argc - 1, argv + 1);
  if (cmd == "report") return cmd_report(argc - 1, argv + 1, argv[0]);
  if (cmd == "--version" || cmd == "version") {
    std::printf("hetrain %s (git %s)\nbuilt: %s\n", HETRAIN_VERSION, HETRAIN_GIT, HETRAIN_BUILD_CONFIG);
    return 0;
  }
  if (cmd == "models" || cmd == "devices") {
    try {
      return cmd == "models" ? cmd_models(argc - 1, argv + 1) : cmd_devices();
    } catch (const hetrain::Error& e) {
      std::fprintf(stderr, "hetrain: error: %s\n", e.message().c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hetrain: error: %s\n", e.what());
      return 1;
    }
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (launcher_rank() == 0) {
    if (cmd.empty()) std::fputs(kUsage, stderr);
    else std::fprintf(stderr, "hetrain: error: unknown command '%s' (try: hetrain --help)\n", cmd.c_str());
  }
  return command_line_error();
}
