#include "train/setup.hpp"

#include <mpi.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/resources.hpp"
#include "hetrain/threading.hpp"
#include "data/pack.hpp"
#include "train/init_weights.hpp"
#include "train/outputs.hpp"

namespace hetrain::train {

std::vector<int64_t> parse_int_list(const std::string& text, const char* option) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    HT_CHECK(used > 0 && used == item.size(), option, ": ", quoted(item), " is not an integer (expected e.g. 5,0,17,10)");
    out.push_back(v);
  }
  HT_CHECK(!out.empty(), option, ": empty list");
  return out;
}

std::vector<int> parse_groups(const std::string& text, int ranks) {
  if (text == "node" || text == "speed") return {};
  HT_CHECK(text.find_first_not_of("0123456789,") == std::string::npos,
           "--groups must be node, speed or a group id per rank (e.g. 0,0,1,1), got ", quoted(text));
  const std::vector<int64_t> ids = parse_int_list(text, "--groups");
  HT_CHECK(int(ids.size()) == ranks, "--groups lists ", ids.size(), " group ids for ", ranks, " ranks");
  std::vector<int> out;
  for (int64_t id : ids) {
    HT_CHECK(id < ranks, "--groups: group id ", id, " is not below the number of ranks (", ranks, ")");
    out.push_back(int(id));
  }
  return out;
}

namespace {
std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(size_t(1) << 30));
  return buf;
}
}  // namespace

void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes)
    std::fprintf(note.rfind("warning:", 0) == 0 ? stderr : stdout, "%s\n", note.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
}

// Where a resumed run starts. The asynchronous modes hand out samples one by one: they start at the exact
// sample. The synchronous mode starts at a step of its plan and, when an asynchronous run stopped inside
// that step, skips the samples of it already trained (its first step is smaller): each sample once per
// epoch, whichever modes stop and resume (docs/architecture.md, "Invariants").
void set_resume_point(const TrainConfig& cfg, Setup& s, int64_t step, int64_t position) {
  const int64_t B = cfg.step_batch(), N = s.train->info().num_samples, per_epoch = s.plan->steps_per_epoch();
  if (position < 0) {  // a checkpoint from before sample_position: at its step boundary, as written
    s.start_step = step, s.start_sample = step * B, s.start_skip = 0;
    return;
  }
  int64_t epoch = position / N, step_in_epoch = (position % N) / B, skip = (position % N) % B;
  if (step_in_epoch >= per_epoch) epoch += 1, step_in_epoch = 0, skip = 0;  // in an epoch's dropped tail
  s.start_sample = position;
  s.start_step = s.mode == Mode::Sync ? epoch * per_epoch + step_in_epoch : position / B;
  s.start_skip = s.mode == Mode::Sync ? skip : 0;
}

RunIdentity run_identity(const TrainConfig& cfg, const Setup& s) {
  const auto& info = s.train->info();
  RunIdentity r;
  r.model = cfg.model;
  r.input_shape = {info.channels, info.height, info.width};
  r.num_classes = info.num_classes;
  r.global_batch = cfg.step_batch();
  r.num_samples = info.num_samples;
  r.steps_per_epoch = s.plan->steps_per_epoch();
  r.seed = cfg.seed;
  return r;
}

CheckpointInfo checkpoint_info(const TrainConfig& cfg, const Setup& s, int64_t global_step, int world_size) {
  const auto& data = s.train->info();
  CheckpointInfo info;
  info.model = cfg.model;
  info.input_shape = {data.channels, data.height, data.width};
  info.num_classes = data.num_classes;
  info.global_step = global_step;
  info.steps_per_epoch = s.plan->steps_per_epoch();
  info.epoch = global_step / info.steps_per_epoch;
  info.step_in_epoch = global_step % info.steps_per_epoch;
  info.samples_in_epoch = info.step_in_epoch * cfg.step_batch();
  info.sample_position = info.epoch * data.num_samples + std::min(info.samples_in_epoch, data.num_samples);
  info.global_batch = cfg.step_batch();
  info.num_samples = data.num_samples;
  info.seed = cfg.seed;
  info.world_size = world_size;
  info.schedule = s.schedule->config();
  info.peak_lr = s.schedule->peak_lr();
  info.total_steps = s.total_steps;
  info.sgd = s.sgd->config();
  if (s.loss_scaler.active()) {
    info.loss_scale = s.loss_scaler.scale();
    info.loss_scale_good_steps = s.loss_scaler.good_steps();
  }
  info.config_text = cfg.config_text.empty() ? cfg.canonical() : cfg.config_text;
  info.alpha.assign(size_t(world_size), 0.0);
  info.beta.assign(size_t(world_size), 0.0);
  return info;
}

void resolve_device(const std::string& requested, int threads, bool quiet, const dist::World& world, Setup& s) {
  const std::string cpu = "cpu (" + std::to_string(threads) + (threads == 1 ? " thread, " : " threads, ") +
                          ops::cpu::cpu_kernels_description() + ")";
  const int gpus = requested == "cpu" ? 0 : cuda_device_count();
  if (requested == "cuda") HT_CHECK(gpus > 0, "--device cuda: ", cuda_status(), "; use --device cpu or auto");
  if (gpus == 0) {
    if (requested == "auto" && world.rank() == 0 && cuda_built() && !quiet) {
      // CUDA's own words for "no driver" are "driver version is insufficient": say it plainly.
      const std::string status = cuda_status();
      const bool none = status.find("cudaErrorInsufficientDriver") != std::string::npos ||
                        status.find("cudaErrorNoDevice") != std::string::npos;
      std::printf("device: %s; training on the CPU\n", none ? "no NVIDIA driver or GPU found" : status.c_str());
    }
    s.device_kind = Device::CPU;
    s.device = cpu;
    return;
  }
  const int index = s.gpu_index = cuda_select_device(world.local_rank());
  const CudaDeviceInfo info = cuda_device_info(index);
  s.device_kind = Device::CUDA;
  s.device = "cuda:" + std::to_string(index) + " " + info.name + " (" + gib(info.total_bytes) + ", " +
             gib(info.free_bytes) + " free, sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor) + ")";
}

namespace {
// Collective, after resolve_device on every rank: refuses a node where two ranks train on one GPU, with the
// same line on every rank (gpu_sharing_error in hetrain/cuda.hpp). GPUs are compared by UUID, so Slurm's
// per-task binding, where every rank's own GPU is its "cuda:0", passes.
void refuse_shared_gpus(const dist::World& world, const Setup& s) {
  GpuClaim mine;
  mine.host = world.host();
  mine.local_rank = world.local_rank();
  if (s.device_kind == Device::CUDA) {
    mine.visible = cuda_device_count();
    try {  // read moments ago by resolve_device; a failure now shows at this rank's next GPU call
      mine.gpu = cuda_device_info(s.gpu_index).uuid;
    } catch (const Error&) {
    }
  }
  std::vector<GpuClaim> all;
  for (const std::string& t : dist::allgather_strings(world.comm(), gpu_claim_text(mine)))
    all.push_back(parse_gpu_claim(t));
  const std::string why = gpu_sharing_error(all);
  if (!why.empty()) throw AgreedError(why, __FILE__, __LINE__);
}

// The testing aids' "RANK:STEP" (nothing when empty).
void parse_rank_step(const std::string& text, const char* option, int ranks, int* rank_out, int64_t* step_out) {
  if (text.empty()) return;
  int rank = -1;
  long long step = -1;
  char end = 0;
  HT_CHECK(std::sscanf(text.c_str(), "%d:%lld%c", &rank, &step, &end) == 2 && rank >= 0 && rank < ranks && step >= 0,
           option, " wants RANK:STEP with a rank below ", ranks, ", got ", quoted(text));
  *rank_out = rank;
  *step_out = step;
}

// A float option's value as a range check reports it: every digit it holds (0.99999994, not 1), and for a
// value the command line gave below 1 that rounded up to 1, what happened.
std::string float_text(float x) {
  char text[96];
  std::snprintf(text, sizeof text, "%.9g", double(x));
  std::string out = text;
  if (x == 1.0f) out += " (the nearest 32-bit float to the value given; the largest below 1 is 0.99999994)";
  return out;
}

// The option checks that need neither data nor model, in the order a user meets them; returns the mode.
Mode check_options(const TrainConfig& cfg, int ranks) {
  HT_CHECK(cfg.global_batch >= 1, "--global-batch must be at least 1, got ", cfg.global_batch);
  HT_CHECK(cfg.accumulate >= 1 && cfg.accumulate <= (int64_t(1) << 20), "--accumulate must be at least 1, got ",
           cfg.accumulate);
  HT_CHECK(cfg.epochs >= 1, "--epochs must be at least 1, got ", cfg.epochs);
  HT_CHECK(cfg.prefetch_depth >= 1, "--prefetch must be at least 1, got ", cfg.prefetch_depth);
  HT_CHECK(cfg.decode_threads >= 0, "--decode-threads must not be negative (0: as many as --threads), got ",
           cfg.decode_threads);
  HT_CHECK(cfg.label_smoothing >= 0 && cfg.label_smoothing < 1, "--label-smoothing must be in [0, 1), got ",
           float_text(cfg.label_smoothing));
  HT_CHECK(cfg.last_batch == "drop" || cfg.last_batch == "partial", "--last-batch must be drop or partial, got '",
           cfg.last_batch, "'");
  HT_CHECK(cfg.synthetic >= 0, "--synthetic must be a positive number of samples, got ", cfg.synthetic);
  HT_CHECK(cfg.synthetic_val >= 0, "--synthetic-val must not be negative, got ", cfg.synthetic_val);
  HT_CHECK(std::isfinite(cfg.lr) && cfg.lr > 0, "--lr must be a finite number > 0, got ", cfg.lr);
  HT_CHECK(std::isfinite(cfg.momentum) && cfg.momentum >= 0, "--momentum must be a finite number >= 0, got ",
           cfg.momentum);
  HT_CHECK(std::isfinite(cfg.weight_decay) && cfg.weight_decay >= 0,
           "--weight-decay must be a finite number >= 0, got ", cfg.weight_decay);
  HT_CHECK(std::isfinite(cfg.warmup_epochs) && cfg.warmup_epochs >= 0, "--warmup-epochs must be >= 0, got ",
           cfg.warmup_epochs);
  HT_CHECK(cfg.warmup_min_steps >= 0, "--warmup-min-steps must be >= 0, got ", cfg.warmup_min_steps);
  HT_CHECK(std::isfinite(cfg.warmup_bias_lr) && cfg.warmup_bias_lr >= 0, "--warmup-bias-lr must be >= 0, got ",
           cfg.warmup_bias_lr);
  HT_CHECK(std::isfinite(cfg.warmup_momentum) && cfg.warmup_momentum < 1,
           "--warmup-momentum must be in [0, 1), got ", float_text(cfg.warmup_momentum));
  HT_CHECK(cfg.warmup_momentum < 0 || !cfg.nesterov || cfg.warmup_momentum > 0,
           "--warmup-momentum 0 with --nesterov: Nesterov needs a momentum > 0");
  HT_CHECK(std::isfinite(cfg.ema_decay) && cfg.ema_decay >= 0 && cfg.ema_decay < 1,
           "--ema-decay must be in [0, 1) (0: no moving average), got ", float_text(cfg.ema_decay));
  HT_CHECK(std::isfinite(cfg.ema_ramp) && cfg.ema_ramp > 0, "--ema-ramp must be > 0 updates, got ", cfg.ema_ramp);
  HT_CHECK(cfg.val_every_samples >= 0, "--val-every-samples must not be negative, got ", cfg.val_every_samples);
  HT_CHECK(cfg.max_steps >= 0, "--max-steps must not be negative, got ", cfg.max_steps);
  HT_CHECK(cfg.stop_at_step >= 0, "--stop-at-step must not be negative, got ", cfg.stop_at_step);
  HT_CHECK(cfg.checkpoint_every >= 0, "--checkpoint-every must not be negative, got ", cfg.checkpoint_every);
  HT_CHECK(std::isfinite(cfg.checkpoint_minutes) && cfg.checkpoint_minutes >= 0,
           "--checkpoint-minutes must be >= 0, got ", cfg.checkpoint_minutes);
  HT_CHECK(cfg.keep_checkpoints >= 1, "--keep-checkpoints must be at least 1, got ", cfg.keep_checkpoints);
  HT_CHECK(std::isfinite(cfg.stall_timeout) && cfg.stall_timeout >= 0, "--stall-timeout must be >= 0 seconds, got ",
           cfg.stall_timeout);
  HT_CHECK(cfg.init_from.empty() || cfg.resume.empty(), "--init-from starts a new run from weights and --resume "
           "continues one: give one of them");
  const Mode mode = parse_mode(cfg.mode);
  if (is_elastic(mode)) {
    HT_CHECK(cfg.fixed_split.empty(), "--split fixes the synchronous split; --mode ", cfg.mode,
             " has no global split (each rank takes --local-batch samples per step)");
    HT_CHECK(std::isfinite(cfg.elastic_alpha) && cfg.elastic_alpha > 0 && cfg.elastic_alpha <= 1,
             "--elastic-alpha must be in (0, 1], got ", float_text(cfg.elastic_alpha));
    HT_CHECK(cfg.elastic_every >= 1, "--elastic-every must be at least 1 local step, got ", cfg.elastic_every);
    HT_CHECK(cfg.local_batch >= 0, "--local-batch must not be negative, got ", cfg.local_batch);
    HT_CHECK(cfg.stop_at_step == 0, "--stop-at-step is for the synchronous mode (async ranks have no common step)");
  }
  if (mode == Mode::Hybrid) parse_groups(cfg.groups, ranks);
  dist::bucket_floats(cfg.bucket_mb);     // throws for a bad --bucket-mb
  dist::parse_wire(cfg.reduce_precision);  // throws for a bad --reduce-precision
  dist::parse_compress_rank(cfg.compress);  // throws for a bad --compress
  HT_CHECK(cfg.compress_start >= 0, "--compress-start must be a step >= 0, got ", cfg.compress_start);
  dist::parse_hierarchy(cfg.hierarchical);  // throws for a bad --hierarchical
  return mode;
}

// The epoch plan of `num_samples` training samples; throws when not one step fits.
std::unique_ptr<data::EpochPlan> epoch_plan(const TrainConfig& cfg, int64_t num_samples) {
  auto plan = std::make_unique<data::EpochPlan>(cfg.seed, num_samples, cfg.step_batch(),
                                                cfg.last_batch == "drop" ? data::LastBatch::Drop : data::LastBatch::Partial);
  HT_CHECK(plan->steps_per_epoch() >= 1, "--global-batch ", cfg.global_batch,
           cfg.accumulate > 1 ? " x --accumulate " + std::to_string(cfg.accumulate) : "", " is larger than the ",
           num_samples, " training samples (with --last-batch drop no step is left)");
  return plan;
}

// Rank 0: the metrics a killed run left (PATH.tmp-PID of a process no longer running on this host) kept as
// PATH.killed-PID, a name that says what they are and that no later run removes; one note each.
std::vector<std::string> keep_killed_metrics(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1),
                    base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::vector<std::string> notes;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return notes;
  const std::string prefix = base + ".tmp-";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name, digits = name.substr(std::min(name.size(), prefix.size()));
    if (name.compare(0, prefix.size(), prefix) != 0 || digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 0 || pid == long(::getpid()) || ::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive
    const std::string from = (dir == "." ? "" : dir) + name, stem = (dir == "." ? "" : dir) + base + ".killed-" + digits;
    std::string to = stem;
    struct stat st {};
    for (int n = 2; ::lstat(to.c_str(), &st) == 0; ++n) to = stem + "." + std::to_string(n);  // a PID used again
    if (::rename(from.c_str(), to.c_str()) == 0)
      notes.push_back("kept " + from + ", the lines of a run that was killed (process " + digits + "), as " + to);
  }
  ::closedir(d);
  std::sort(notes.begin(), notes.end());
  return notes;
}

// Rank 0 writes the checkpoints and the metrics: their folder is checked and locked now, not found
// unwritable after hours, and what killed runs left there is cleared (with a note).
void prepare_output_folders(const TrainConfig& cfg, const dist::World& world, Setup& s) {
  HT_CHECK(cfg.resume != "auto" || !cfg.checkpoint_dir.empty(), "--resume auto needs --checkpoint-dir (where to look)");
  check_train_outputs(cfg, world.rank());  // no output may replace an input or a device node
  if (!cfg.checkpoint_dir.empty() && world.rank() == 0) {  // rank 0 writes; find out now, not after hours
    check_writable_folder(cfg.checkpoint_dir, "--checkpoint-dir");
    std::string gone;
    s.checkpoint_lock = std::make_unique<CheckpointLock>(cfg.checkpoint_dir, gone);
    if (!gone.empty())
      s.notes.push_back("checkpoints: took over the lock of " + cfg.checkpoint_dir + " from a job that is gone (" + gone + ")");
    for (const std::string& f : remove_stale_temporaries(cfg.checkpoint_dir))
      s.notes.push_back("checkpoints: removed " + f + " (left by a writer that is gone)");
  }
  // A run killed outright (SIGKILL, a node lost) leaves its metrics in PATH.tmp-PID; the next run writing the
  // same path keeps those of processes that no longer run on this host as PATH.killed-PID (docs/report.md).
  if (!cfg.metrics_path.empty() && world.rank() == 0)
    for (const std::string& f : keep_killed_metrics(cfg.metrics_path)) s.notes.push_back("metrics: " + f);
}

// The training data (and validation data), checked against each other and against the rank count.
void open_data(const TrainConfig& cfg, int ranks, Setup& s) {
  HT_CHECK((cfg.synthetic > 0) != !cfg.data_path.empty(),
           cfg.synthetic > 0 ? "give either --data or --synthetic, not both" : "no training data: give --data FILE or --synthetic N");

  SourceOptions so;
  so.prefetch_depth = cfg.prefetch_depth;
  so.threads = cfg.threads;
  so.decode_threads = cfg.decode_threads;
  // More decoding threads than the node has cores only compete for them (and 100000 threads would not start).
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  if (cfg.decode_threads > cores) {
    so.decode_threads = cores;
    s.notes.push_back("data: --decode-threads " + std::to_string(cfg.decode_threads) + " capped at " +
                      std::to_string(cores) + ", the cores of this node");
  }
  so.augment.random_crop = so.augment.hflip = cfg.augment && !cfg.resized_crop;
  so.augment.resized_crop = cfg.resized_crop;
  if (cfg.synthetic > 0) {
    HT_CHECK(cfg.synthetic_shape.size() == 3, "--synthetic-shape needs C,H,W");
    data::check_sample_shape("--synthetic-shape", cfg.synthetic_shape[0], cfg.synthetic_shape[1],
                             cfg.synthetic_shape[2]);
    const auto& sh = cfg.synthetic_shape;
    epoch_plan(cfg, cfg.synthetic);  // a batch larger than the samples is refused before they are made
    s.train = make_synthetic_source(cfg.synthetic, sh[0], sh[1], sh[2], cfg.synthetic_classes, cfg.seed, 0, so);
    if (cfg.synthetic_val > 0)
      s.val = make_synthetic_source(cfg.synthetic_val, sh[0], sh[1], sh[2], cfg.synthetic_classes, cfg.seed,
                                    cfg.synthetic, so);
  } else {
    s.train = open_dataset_source(cfg.data_path, so);
  }
  if (!cfg.val_path.empty()) {
    SourceOptions vo = so;
    vo.prefetch_depth = 1;
    s.val = open_dataset_source(cfg.val_path, vo);
  }
  const auto& info = s.train->info();
  if (info.jpeg || (s.val && s.val->info().jpeg)) {
    const int threads = so.decode_threads > 0 ? so.decode_threads : cfg.threads;
    s.notes.push_back("data: JPEG storage, decoded to " + std::to_string(info.height) + "x" + std::to_string(info.width) +
                      " on " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                      " per rank (--decode-threads); evaluation: shorter side to 256/224 of that, centre crop");
  }
  if (s.val) {
    const auto& v = s.val->info();
    HT_CHECK(v.channels == info.channels && v.height == info.height && v.width == info.width &&
                 v.num_classes == info.num_classes,
             "--val ", v.path, ": images ", v.channels, "x", v.height, "x", v.width, " with ", v.num_classes,
             " classes do not match the training data (", info.channels, "x", info.height, "x", info.width, ", ",
             info.num_classes, " classes)");
  }
  HT_CHECK(info.num_samples >= ranks, "the training data has ", info.num_samples, " samples, fewer than the ", ranks,
           " ranks: every rank needs samples");

  // Every rank holds the order of a whole epoch (data::EpochPlan, 8 bytes a sample): a count that cannot fit
  // is refused now, before the model is allocated, not with std::bad_alloc at the first step.
  check_memory_for(double(info.num_samples) * sizeof(int64_t),
                   (cfg.synthetic > 0 ? std::string("--synthetic ") : "--data " + cfg.data_path + ": ") +
                       std::to_string(info.num_samples) + " samples (the epoch order of every sample)");
}

// The model for the data's shape, and its loss: a detector needs boxes, a classifier labels.
void build_model(const TrainConfig& cfg, Setup& s) {
  const auto& info = s.train->info();
  nn::ModelConfig mc;
  mc.name = cfg.model;
  mc.in_channels = info.channels;
  mc.height = info.height;
  mc.width = info.width;
  mc.num_classes = info.num_classes;
  s.model = nn::Model::create(mc);
  s.model->init(cfg.seed);
  // A detector needs boxes, a classifier labels: say so now rather than at the first step.
  const std::string who = "model " + cfg.model;
  for (const BatchSource* src : {s.train.get(), s.val.get()}) {
    if (!src) continue;
    if (s.model->detect_head())
      data::require_detection(src->info(), who);
    else
      data::require_classification(src->info(), who);
  }
  // The training data's augmentation: YOLOv5's for a detector (without a crop and flip), --augment's crop and
  // flip for a classifier (set in open_data).
  s.augment = cfg.augments(s.model->detect_head() != nullptr);
  const data::DetectAugment d = cfg.detect_augment, yolov5 = {};
  const bool detect_options_given = d.mosaic != yolov5.mosaic || d.scale != yolov5.scale ||
                                    d.translate != yolov5.translate || d.hsv_h != yolov5.hsv_h ||
                                    d.hsv_s != yolov5.hsv_s || d.hsv_v != yolov5.hsv_v || d.fliplr != yolov5.fliplr;
  HT_CHECK(!(s.model->detect_head() && cfg.augment), cfg.resized_crop ? "--augment rrc" : "--augment",
           " is a classifier's recipe, and model ", cfg.model,
           " is a detector (augmented without it, by --mosaic, --affine-*, --hsv-* and --fliplr): drop it");
  if (s.model->detect_head() && s.augment) {
    data::AugmentConfig aug;
    aug.detection = true;
    aug.detect = cfg.detect_augment;
    s.train->set_augmentation(aug);
    s.notes.push_back("augmentation: " + cfg.detect_augment.describe() + " (YOLOv5's recipe; --no-augment turns it off)");
  } else if (!s.model->detect_head()) {
    if (s.augment && cfg.resized_crop) {
      const auto& info = s.train->info();
      s.notes.push_back("augmentation: RandomResizedCrop (8-100 % of the area, ratio 3/4-4/3) to " +
                        std::to_string(info.height) + "x" + std::to_string(info.width) + " and a flip (--augment rrc)");
    }
    HT_CHECK(!detect_options_given,
             "--mosaic, --affine-*, --hsv-* and --fliplr augment detectors, and model ", cfg.model,
             " is a classifier: drop them (--augment crops and flips a classifier's images)");
  }
  if (s.model->detect_head()) {
    s.detection = std::make_unique<DetectionLoss>(*s.model->detect_head(), cfg.label_smoothing);
    for (BatchSource* src : {s.train.get(), s.val.get()})
      if (src) scale_detector_inputs(*src);
  } else {
    s.loss = std::make_unique<ops::SoftmaxXentLoss>();
  }
}

// The epoch plan, the run's length, the learning-rate schedule and the optimizer.
void build_optimizer(const TrainConfig& cfg, Setup& s) {
  const auto& info = s.train->info();
  s.plan = epoch_plan(cfg, info.num_samples);
  const int64_t spe = s.plan->steps_per_epoch();
  s.total_steps = spe * cfg.epochs;
  if (cfg.max_steps > 0) s.total_steps = std::min(s.total_steps, cfg.max_steps);

  optim::ScheduleConfig sc;
  sc.base_lr = cfg.lr;
  sc.linear_scaling = cfg.linear_scaling;
  // YOLOv5 warms up over max(3 epochs, 100 steps), however short the run: capped at the run here.
  sc.warmup_steps = std::min(std::max(static_cast<int64_t>(cfg.warmup_epochs * spe), cfg.warmup_min_steps),
                             s.total_steps);
  sc.warmup_bias_lr = cfg.warmup_bias_lr;
  sc.warmup_momentum = cfg.warmup_momentum;
  sc.decay = cfg.schedule;
  for (int e : cfg.milestones) sc.milestones.push_back(int64_t(e) * spe);
  sc.gamma = cfg.gamma;
  s.schedule = std::make_unique<optim::LrSchedule>(sc, cfg.step_batch(), s.total_steps);

  optim::SgdConfig oc;
  oc.momentum = cfg.momentum;
  oc.nesterov = cfg.nesterov;
  oc.weight_decay = cfg.weight_decay;
  oc.decay_bn_and_bias = cfg.decay_bn_and_bias;
  s.sgd = std::make_unique<optim::Sgd>(s.model->params(), oc);
}

// Collective. A resumed --compress run continues the checkpoint's factors and error feedback: on as many
// ranks as wrote it, each rank takes its own row (the run goes on bit for bit); on another number, rank 0
// takes the rows' sum and the others none, which owes the next steps the same total (dist/powersgd.hpp).
// A checkpoint without PowerSGD state of this rank starts afresh, with a note.
void restore_compression(const TrainConfig& cfg, Setup& s, const CheckpointTensors* resumed, const dist::World& world) {
  if (!resumed) return;
  dist::PowerSgd& p = *s.powersgd;
  if (resumed->powersgd_rank != p.rank() || resumed->powersgd_q.size() != p.q().size()) {
    s.notes.push_back("resume: the checkpoint has no PowerSGD state of rank " + std::to_string(p.rank()) +
                      ": --compress " + cfg.compress + " starts with fresh factors and no owed error");
    return;
  }
  p.q() = resumed->powersgd_q;
  const size_t n = p.error().size();
  const int64_t rows = resumed->powersgd_rows;
  if (rows != world.size()) {
    if (world.rank() == 0)
      for (int64_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < n; ++i) p.error()[i] += resumed->powersgd_error[size_t(r) * n + i];
    s.notes.push_back("resume: the PowerSGD error feedback of the checkpoint's " + std::to_string(rows) +
                      " ranks is carried on by rank 0 (their sum is what the next steps owe)");
    return;
  }
  const size_t chunk = std::max<size_t>(1, size_t(INT_MAX) / size_t(world.size()));
  std::vector<float> piece;
  for (size_t off = 0; off < n; off += chunk) {
    const size_t c = std::min(chunk, n - off);
    if (world.rank() == 0) {
      piece.resize(c * size_t(world.size()));
      for (int r = 0; r < world.size(); ++r)
        std::copy_n(resumed->powersgd_error.data() + size_t(r) * n + off, c, piece.data() + size_t(r) * c);
    }
    HT_MPI_CHECK(MPI_Scatter(piece.data(), int(c), MPI_FLOAT, p.error().data() + off, int(c), MPI_FLOAT, 0,
                             world.comm()));
  }
}

// --compress powersgd:R: the plan over the model's parameters (the same on every rank).
void build_compression(const TrainConfig& cfg, Setup& s) {
  const int rank = dist::parse_compress_rank(cfg.compress);
  if (rank == 0) return;
  std::vector<dist::PowerSgd::Param> params;
  for (const nn::ParamSpec& p : s.model->params().specs()) params.push_back({p.offset, p.shape});
  s.powersgd = std::make_unique<dist::PowerSgd>(params, s.model->params().count(), rank, cfg.seed);
}

// Rank 0 reads the checkpoint to resume from (make_setup hands it to every rank) and finds which of the
// folder's checkpoints this run continues (the only ones it may prune).
void choose_resume(const TrainConfig& cfg, Setup& s) {
  ResumeChoice choice = load_for_resume(cfg, run_identity(cfg, s), s.model->params(),
                                        cfg.config_text.empty() ? cfg.canonical() : cfg.config_text);
  s.resume = std::move(choice.checkpoint);
  s.notes.insert(s.notes.end(), choice.notes.begin(), choice.notes.end());
  if (!cfg.checkpoint_dir.empty()) {
    int others = 0;
    std::string newest_other;
    s.prunable_checkpoints = checkpoints_continued(cfg.checkpoint_dir, s.resume ? s.resume->info.global_step : -1,
                                                   run_identity(cfg, s), others, newest_other);
    if (others > 0)
      s.notes.push_back("checkpoints: " + cfg.checkpoint_dir + " holds " + std::to_string(others) +
                        " checkpoint file(s) this run does not continue (newest " + newest_other +
                        "); they are never pruned, and --resume auto would prefer a higher-numbered one");
  }
}

// A fixed --split, or the balancer that fits the split to the ranks' measured speeds.
void build_split(const TrainConfig& cfg, const dist::World& world, Setup& s) {
  const int ranks = world.size();
  if (!cfg.fixed_split.empty()) {
    s.fixed_split = parse_int_list(cfg.fixed_split, "--split");
    HT_CHECK(int(s.fixed_split.size()) == ranks, "--split lists ", s.fixed_split.size(), " batch sizes for ", ranks, " ranks");
    int64_t sum = 0;
    for (int64_t b : s.fixed_split) {
      HT_CHECK(b >= 0, "--split: batch sizes must not be negative, got ", b);
      sum += b;
    }
    HT_CHECK(sum == cfg.global_batch, "--split sums to ", sum, " but --global-batch is ", cfg.global_batch);
  } else {
    HT_CHECK(cfg.global_batch >= ranks, "--global-batch ", cfg.global_batch, " is smaller than the ", ranks,
             " ranks: each rank needs at least one sample to be measured (use a larger batch or fewer ranks)");
    dist::BalanceConfig bc;
    bc.mode = dist::parse_balance_mode(cfg.balance);
    HT_CHECK(cfg.rebalance_every >= 1, "--rebalance-every must be at least 1, got ", cfg.rebalance_every);
    bc.rebalance_every = cfg.rebalance_every;
    // Batches are requested prefetch_depth steps ahead, so a new split shows up that much later: each
    // calibration phase must outlast the lag to be measured.
    bc.calibration_steps = std::max(3, cfg.prefetch_depth + 2);
    if (!cfg.max_local_batch.empty()) bc.caps = parse_int_list(cfg.max_local_batch, "--max-local-batch");
    // Ghost batch norm's groups are the global batch's only when every share is made of whole groups.
    if (s.mode == Mode::Sync && s.batch_norm->kind == nn::BatchNormMode::Kind::Ghost)
      bc.granularity = s.batch_norm->ghost_group;
    s.balancer = std::make_unique<dist::Balancer>(world.comm(), cfg.global_batch, bc);
    s.balance_config = bc;
  }
}

// Every check that needs no communication. Same config on every rank → same verdict, except for
// rank-local facts (a file one node cannot read).
Setup build_locally(const TrainConfig& cfg, dist::World& world) {
  Setup s;
  HT_CHECK(cfg.threads >= 1, "--threads must be at least 1, got ", cfg.threads);
  set_num_threads(cfg.threads);
  HT_CHECK(cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda",
           "--device must be auto, cpu or cuda, got ", quoted(cfg.device));
  resolve_device(cfg.device, cfg.threads, cfg.quiet, world, s);
  s.mode = check_options(cfg, world.size());
  prepare_output_folders(cfg, world, s);
  open_data(cfg, world.size(), s);
  build_model(cfg, s);
  build_compression(cfg, s);
  build_optimizer(cfg, s);
  if (world.rank() == 0) choose_resume(cfg, s);
  s.emulator = dist::SpeedEmulator(cfg.emulate_speed, cfg.emulate_schedule, world.size());
  s.batch_norm = choose_batch_norm(cfg, s);
  if (s.batch_norm->kind != nn::BatchNormMode::Kind::Local && !s.model->has_batch_coupling())
    s.notes.push_back("--bn " + cfg.batch_norm + ": model " + cfg.model + " has no batch norm; nothing changes");
  build_split(cfg, world, s);
  check_ghost_split(*s.batch_norm, s.fixed_split, cfg.batch_norm);
  parse_rank_step(cfg.debug_fail_at, "--debug-fail-at", world.size(), &s.fail_rank, &s.fail_step);
  parse_rank_step(cfg.debug_overflow_at, "--debug-overflow-at", world.size(), &s.overflow_rank, &s.overflow_step);
  return s;
}

// GPU ranks: the model and its input buffers go to the GPU, and the largest local batch that fits
// in the memory left is measured. Runs after the parameter checksum (which reads host memory). A failure
// here (e.g. out of memory) is this rank's alone: the caller ends the job.
void place_on_device(const TrainConfig& cfg, Setup& s) {
  if (s.device_kind != Device::CUDA) {
    if (cfg.precision != Precision::FP32) s.device += ", fp32";  // the table shows that CPU ranks keep FP32
    return;
  }
  s.precision = cfg.precision;
  s.model->to(Device::CUDA, cfg.precision);
  s.input = std::make_unique<DeviceInput>(s.train->info());
  if (s.val) s.val_input = std::make_unique<DeviceInput>(s.val->info());
  int64_t per_sample = s.model->activation_bytes_per_sample();
  // 16-bit convolutions and products cast their operands into scratch that grows with the batch and is not
  // part of the activation pool; measured after the batch-4 step above, so at most this much per sample.
  if (is_16bit(cfg.precision)) per_sample += int64_t(cuda::low_precision_scratch_bytes() / 4);
  const CudaDeviceInfo info = cuda_device_info(s.gpu_index);
  // Kept free: a tenth of the GPU (cuDNN workspaces of later shapes, fragmentation, other processes'
  // growth) and the optimizer's two parameter-sized buffers, both uploaded at the first step: the momentum
  // buffer and the weight-decay mask (src/nn/sgd.cpp).
  const int64_t reserve = int64_t(info.total_bytes / 10) + 2 * s.model->params().count() * int64_t(sizeof(float));
  s.memory_cap = dist::memory_batch_cap(int64_t(info.free_bytes), reserve, std::max<int64_t>(per_sample, 1));
  s.device += std::string(", ") + precision_name(cfg.precision) + ", fits " + std::to_string(s.memory_cap) +
              " samples (" + std::to_string(per_sample >> 10) + " KiB each)";
}

// Collective: every rank's memory cap becomes a balancer cap (the smaller of it and --max-local-batch).
// The caps are the same on every rank, so a verdict here is the same everywhere (AgreedError).
void apply_memory_caps(const TrainConfig& cfg, const dist::World& world, Setup& s) {
  std::vector<int64_t> caps(world.size());
  HT_MPI_CHECK(MPI_Allgather(&s.memory_cap, 1, MPI_INT64_T, caps.data(), 1, MPI_INT64_T, world.comm()));
  if (std::all_of(caps.begin(), caps.end(), [](int64_t c) { return c < 0; })) return;
  try {
    if (!s.fixed_split.empty()) {
      for (int r = 0; r < world.size(); ++r)
        HT_CHECK(caps[r] < 0 || s.fixed_split[r] <= caps[r], "--split gives rank ", r, " ", s.fixed_split[r],
                 " samples, but its GPU memory fits ", caps[r]);
      return;
    }
    const auto merged = dist::merge_caps(dist::resolve_caps(s.balance_config, world.size(), cfg.global_batch), caps);
    int64_t room = 0;  // Σ caps, saturating at B (uncapped ranks hold INT64_MAX)
    std::string listed;
    for (int64_t c : merged) {
      room = c >= cfg.global_batch - room ? cfg.global_batch : room + c;
      listed += (listed.empty() ? "" : ", ") + (c == INT64_MAX ? std::string("-") : std::to_string(c));
    }
    HT_CHECK(room >= cfg.global_batch, "GPU memory caps the local batches at [", listed, "], less than --global-batch ",
             cfg.global_batch, " in all: lower the global batch or add ranks");
    s.balance_config.caps = merged;
    s.balancer = std::make_unique<dist::Balancer>(world.comm(), cfg.global_batch, s.balance_config);
  } catch (const Error& e) {
    throw AgreedError(e.message(), __FILE__, __LINE__);
  }
}

// --init-from: rank 0 reads the file (a bad one is one line on every rank), every rank takes its tensors.
void start_from_weights(const TrainConfig& cfg, const dist::World& world, Setup& s) {
  nn::ParamBuffer& params = s.model->params();
  InitialWeights w;
  dist::agree_on_root(world.comm(), [&] {
    w = read_initial_weights(cfg.init_from, params);
    s.notes.push_back(initial_weights_note(cfg.init_from, w));
  });
  w.values.resize(size_t(params.count()));
  w.states.resize(size_t(params.state_count()));
  for (std::vector<float>* v : {&w.values, &w.states}) {
    constexpr size_t kChunk = size_t(1) << 30;  // MPI counts are ints
    for (size_t off = 0; off < v->size(); off += kChunk)
      HT_MPI_CHECK(MPI_Bcast(v->data() + off, int(std::min(kChunk, v->size() - off)), MPI_FLOAT, 0, world.comm()));
  }
  std::copy(w.values.begin(), w.values.end(), params.values().data());
  std::copy(w.states.begin(), w.states.end(), params.states().data());
}

// --ema-decay: the moving average starts from the model as it stands (initialised, or resumed: then the
// checkpoint's average, when it has one, continues).
void start_weight_average(const TrainConfig& cfg, Setup& s, const CheckpointTensors* resumed) {
  if (cfg.ema_decay == 0) {
    if (resumed && resumed->has_ema())
      s.notes.push_back("resume: the checkpoint's moving average of the weights is dropped (no --ema-decay)");
    return;
  }
  s.ema = std::make_unique<optim::WeightAverage>(s.model->params(), cfg.ema_decay, cfg.ema_ramp);
  if (!resumed) return;
  if (!resumed->has_ema()) {
    s.notes.push_back("resume: the checkpoint keeps no moving average; --ema-decay starts one from its weights");
    return;
  }
  std::copy(resumed->ema_values.begin(), resumed->ema_values.end(), s.ema->values().data());
  std::copy(resumed->ema_states.begin(), resumed->ema_states.end(), s.ema->states().data());
  s.ema->set_updates(resumed->ema_updates);
}

}  // namespace

Setup make_setup(const TrainConfig& cfg, dist::World& world) {
  Setup s;
  // The lowest rank that failed speaks for all.
  dist::agree_on(world.comm(), [&] { s = build_locally(cfg, world); });
  try {
    world.check_same_config(cfg.canonical());
  } catch (const Error& e) {  // thrown on every rank
    throw AgreedError(e.message(), __FILE__, __LINE__);
  }
  refuse_shared_gpus(world, s);
  // A resume: rank 0's checkpoint reaches every rank before the parameters are compared.
  CheckpointTensors tensors;
  int64_t step = 0, position = -1;
  double scale_state[2] = {0, 0};  // the loss scale and its good steps (fp16 checkpoints)
  if (s.resume) {
    tensors = std::move(s.resume->tensors), step = s.resume->info.global_step;
    position = s.resume->info.sample_position;
    scale_state[0] = s.resume->info.loss_scale, scale_state[1] = double(s.resume->info.loss_scale_good_steps);
  }
  s.resume.reset();
  s.loss_scaler = LossScaler(cfg.precision == Precision::FP16);
  const bool resumed = broadcast_checkpoint(world.comm(), world.rank() == 0 && !tensors.values.empty(), tensors, step,
                                           s.model->params());
  if (resumed) {
    apply_checkpoint(tensors, s.model->params(), s.sgd.get());
    HT_MPI_CHECK(MPI_Bcast(&position, 1, MPI_INT64_T, 0, world.comm()));
    set_resume_point(cfg, s, step, position);
    HT_MPI_CHECK(MPI_Bcast(scale_state, 2, MPI_DOUBLE, 0, world.comm()));
    // A checkpoint of a run at another precision has no scale: the scaler starts afresh.
    if (s.loss_scaler.active() && scale_state[0] > 0) s.loss_scaler.restore(scale_state[0], int64_t(scale_state[1]));
  }
  if (!cfg.init_from.empty()) start_from_weights(cfg, world, s);
  start_weight_average(cfg, s, resumed ? &tensors : nullptr);
  world.check_identical(s.model->params().values().data(), s.model->params().count(), "initial parameters");
  s.hosts = dist::allgather_strings(world.comm(), world.host());
  s.arrival = std::make_unique<dist::StepArrival>(world.comm(), s.hosts, cfg.stall_timeout);
  place_on_device(cfg, s);
  if (cfg.precision != Precision::FP32) {
    int gpu_ranks = s.device_kind == Device::CUDA ? 1 : 0;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &gpu_ranks, 1, MPI_INT, MPI_SUM, world.comm()));
    if (gpu_ranks == 0)
      s.notes.push_back(std::string("precision: --precision ") + precision_name(cfg.precision) +
                        " applies to GPU ranks; this job has none, so it computes in FP32");
  }
  const bool overlapped = s.mode == Mode::Sync && cfg.bucket_mb > 0;  // with --compress: before --compress-start
  dist::Hierarchy hierarchy = dist::parse_hierarchy(cfg.hierarchical);
  // auto leaves started buckets flat: their three hierarchical stages advance only between layers, and that
  // exposed 38-40% of the step against 3-11% flat (docs/architecture.md, Gradient reduction).
  if (hierarchy == dist::Hierarchy::Auto && overlapped) hierarchy = dist::Hierarchy::Off;
  s.comm = dist::make_gradient_communicator(world.comm(), s.device_kind, dist::node_oversubscribed(world.local_size()),
                                            hierarchy, world.node_comm());
  s.wire = dist::parse_wire(cfg.reduce_precision);
  // The backend is the same on every rank (make_gradient_communicator chose it collectively): all refuse alike,
  // as one line from rank 0 and a clean exit (AgreedError), not an MPI_Abort of each.
  if (!s.comm->carries(s.wire))
    throw AgreedError(detail::concat("--reduce-precision ", dist::wire_name(s.wire), ": the ", s.comm->name(),
                                     " reduction of this job has no 16-bit transport yet (use --reduce-precision fp32)"),
                      __FILE__, __LINE__);
  if (s.powersgd) {
    int gpu_ranks = s.device_kind == Device::CUDA ? 1 : 0;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &gpu_ranks, 1, MPI_INT, MPI_SUM, world.comm()));
    if (gpu_ranks != 0)  // the sum of every rank's answer: all refuse alike
      throw AgreedError(detail::concat("--compress ", cfg.compress, ": PowerSGD runs on CPU ranks only so far, and ",
                                       gpu_ranks, " rank(s) of this job train on a GPU (use --device cpu, or drop --compress)"),
                        __FILE__, __LINE__);
    restore_compression(cfg, s, resumed ? &tensors : nullptr, world);
  } else if (resumed && tensors.powersgd_rank > 0) {
    s.notes.push_back("resume: the checkpoint's PowerSGD state is dropped (no --compress): its owed error is not applied");
  }
  if (overlapped) {
    const nn::ParamBuffer& params = s.model->params();
    std::vector<int64_t> begins;
    for (const nn::ParamSpec& p : params.specs()) begins.push_back(p.offset);
    s.buckets = std::make_unique<dist::BucketedReduction>(
        *s.comm, dist::plan_buckets(begins, params.count(), dist::bucket_floats(cfg.bucket_mb)), s.wire);
    // PowerSGD's steps send each bucket's factors during backward too, its Q's on a communicator of their own.
    if (s.powersgd && s.comm->overlaps()) {
      s.powersgd->use_buckets(s.buckets->buckets());
      s.powersgd_q_comm = dist::make_gradient_communicator(world.comm(), s.device_kind,
                                                           dist::node_oversubscribed(world.local_size()), hierarchy,
                                                           world.node_comm());
    }
  }
  apply_memory_caps(cfg, world, s);
  // Hybrid and async connect their groups' batches (train/elastic_group.cpp).
  if (s.mode == Mode::Sync) connect_shared_batch(s, world.comm());
  // Collective, so only now that every rank is known to be healthy.
  if (cfg.node_cache) {
    s.train->enable_node_cache(world.node_comm());
    if (s.val) s.val->enable_node_cache(world.node_comm());
  }
  return s;
}

}  // namespace hetrain::train
