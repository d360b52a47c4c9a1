#include "train/resume.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "hetrain/error.hpp"

namespace hetrain::train {

namespace {

std::map<std::string, std::string> parse_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    auto trim = [](std::string t) {
      const size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
      return a == std::string::npos ? std::string() : t.substr(a, b - a + 1);
    };
    if (eq != std::string::npos) out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

// "lr 0.1 → 0.05, epochs 3 → 5" for the keys whose values differ.
std::string config_differences(const std::string& before, const std::string& now) {
  const auto a = parse_lines(before), b = parse_lines(now);
  std::string out;
  // How a run is stopped, resumed and checkpointed changes nothing it computes.
  static const char* const kQuiet[] = {"resume", "stop_at_step", "checkpoint_every", "checkpoint_minutes",
                                       "keep_checkpoints", "stall_timeout", "stop-at-step", "checkpoint-every",
                                       "checkpoint-minutes", "keep-checkpoints", "stall-timeout", "checkpoint-dir",
                                       "metrics", "dump-params", "dump-samples", "quiet", "log-every"};
  for (const auto& [key, value] : b) {
    if (std::find(std::begin(kQuiet), std::end(kQuiet), key) != std::end(kQuiet)) continue;
    auto it = a.find(key);
    if (it == a.end() || it->second == value) continue;
    out += (out.empty() ? "" : ", ") + key + " " + (it->second.empty() ? "(none)" : it->second) + " -> " +
           (value.empty() ? "(none)" : value);
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "a, b, c" or "a, b, c and 7 more"
std::string list_text(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 3) out += " and " + std::to_string(names.size() - 3) + " more";
  return out;
}

LoadedCheckpoint load_file(const std::string& path, const RunIdentity& run, const nn::ParamBuffer& layout) {
  LoadedCheckpoint c;
  c.path = path;
  c.info = read_checkpoint_info(path);
  check_compatible(path, c.info, run);
  c.tensors = read_checkpoint_tensors(path, layout);
  return c;
}

}  // namespace

void check_compatible(const std::string& path, const CheckpointInfo& info, const RunIdentity& run) {
  HT_CHECK(info.model == run.model, path, ": checkpoint of model ", quoted(info.model), ", this run trains ",
           quoted(run.model), " (--model)");
  HT_CHECK(info.input_shape == run.input_shape, path, ": checkpoint for ", shape_text(info.input_shape),
           " images, the training data has ", shape_text(run.input_shape));
  HT_CHECK(info.num_classes == run.num_classes, path, ": checkpoint for ", info.num_classes,
           " classes, the training data has ", run.num_classes);
  HT_CHECK(info.global_batch == run.global_batch, path, ": checkpoint of a run with --global-batch ",
           info.global_batch, ", this run has ", run.global_batch, " (the sample order and schedule would differ)");
  HT_CHECK(info.num_samples == run.num_samples, path, ": checkpoint of a run on ", info.num_samples,
           " training samples, this dataset has ", run.num_samples, " (another dataset?)");
  HT_CHECK(info.seed == run.seed, path, ": checkpoint of a run with --seed ", info.seed, ", this run has ", run.seed,
           " (the sample order would differ)");
  HT_CHECK(info.steps_per_epoch == run.steps_per_epoch, path, ": checkpoint with ", info.steps_per_epoch,
           " steps per epoch, this run has ", run.steps_per_epoch, " (--last-batch differs?)");
}

std::vector<std::string> checkpoints_continued(const std::string& dir, int64_t resumed_step, const RunIdentity& run,
                                               int& others, std::string& newest_other) {
  std::vector<std::string> mine;
  others = 0;
  newest_other.clear();
  for (const std::string& path : list_checkpoints(dir)) {  // newest first
    bool continued = false;
    if (checkpoint_step(path) <= resumed_step) {
      try {
        check_compatible(path, read_checkpoint_info(path), run);
        continued = true;
      } catch (const Error&) {  // damaged, or another run's: not this run's to remove
      }
    }
    if (continued) {
      mine.push_back(path);
    } else if (others++ == 0) {
      newest_other = path;
    }
  }
  return mine;
}

ResumeChoice load_for_resume(const TrainConfig& cfg, const RunIdentity& run, const nn::ParamBuffer& layout,
                             const std::string& canonical_config) {
  ResumeChoice choice;
  if (cfg.resume.empty()) return choice;
  if (cfg.resume != "auto") {
    choice.checkpoint = load_file(cfg.resume, run, layout);  // any problem refuses the run
  } else {
    HT_CHECK(!cfg.checkpoint_dir.empty(), "--resume auto needs --checkpoint-dir (where to look)");
    std::vector<std::string> skipped;  // damaged files, by name
    for (const std::string& path : list_checkpoints(cfg.checkpoint_dir)) {
      // Another model or dataset is a mistake to report, not a file to skip; a damaged file is skipped.
      CheckpointInfo info;
      try {
        info = read_checkpoint_info(path);
      } catch (const Error& e) {
        choice.notes.push_back("resume: skipping " + e.message());
        skipped.push_back(base_name(path));
        continue;
      }
      check_compatible(path, info, run);
      try {
        choice.checkpoint = load_file(path, run, layout);
        break;
      } catch (const Error& e) {
        choice.notes.push_back("resume: skipping " + e.message());
        skipped.push_back(base_name(path));
      }
    }
    if (!choice.checkpoint && skipped.empty())
      choice.notes.push_back("resume: no checkpoint in " + cfg.checkpoint_dir + "; starting from the beginning");
    if (!choice.checkpoint && !skipped.empty())
      choice.notes.push_back("warning: --resume auto: every checkpoint in " + cfg.checkpoint_dir + " is damaged (" +
                             list_text(skipped) + "); starting from the beginning (they are left as they are)");
  }
  if (choice.checkpoint) {
    const LoadedCheckpoint& c = *choice.checkpoint;
    choice.notes.push_back("resume: " + c.path + " (step " + std::to_string(c.info.global_step) + ", epoch " +
                           std::to_string(c.info.epoch + 1) + ", written by " + std::to_string(c.info.world_size) +
                           " rank(s))");
    const std::string diff = config_differences(c.info.config_text, canonical_config);
    if (!diff.empty()) choice.notes.push_back("resume: settings that differ from the checkpoint's: " + diff);
  }
  return choice;
}

bool broadcast_checkpoint(MPI_Comm comm, bool has, CheckpointTensors& t, int64_t& global_step,
                          const nn::ParamBuffer& layout) {
  int flag = has ? 1 : 0;
  HT_MPI_CHECK(MPI_Bcast(&flag, 1, MPI_INT, 0, comm));
  if (!flag) return false;
  int64_t head[7] = {global_step, t.num_batches_tracked, t.has_ema() ? 1 : 0, t.ema_updates, t.powersgd_rank,
                     int64_t(t.powersgd_q.size()), t.powersgd_rows};
  HT_MPI_CHECK(MPI_Bcast(head, 7, MPI_INT64_T, 0, comm));
  global_step = head[0];
  t.num_batches_tracked = head[1];
  t.ema_updates = head[3];
  // PowerSGD: every rank gets Q and the number of error rows; the rows stay on rank 0, which hands them
  // out (train/setup.cpp, restore_compression).
  t.powersgd_rank = head[4];
  t.powersgd_q.resize(size_t(head[5]));
  t.powersgd_rows = head[6];
  t.values.resize(size_t(layout.count()));
  t.momentum.resize(size_t(layout.count()));
  t.states.resize(size_t(layout.state_count()));
  std::vector<std::vector<float>*> sent = {&t.values, &t.momentum, &t.states};
  if (head[2]) {
    t.ema_values.resize(size_t(layout.count()));
    t.ema_states.resize(size_t(layout.state_count()));
    sent.insert(sent.end(), {&t.ema_values, &t.ema_states});
  }
  if (head[4] > 0) sent.push_back(&t.powersgd_q);
  for (std::vector<float>* v : sent) {
    constexpr size_t kChunk = size_t(1) << 30;  // MPI counts are ints
    for (size_t off = 0; off < v->size(); off += kChunk)
      HT_MPI_CHECK(MPI_Bcast(v->data() + off, int(std::min(kChunk, v->size() - off)), MPI_FLOAT, 0, comm));
  }
  return true;
}

void apply_checkpoint(const CheckpointTensors& t, nn::ParamBuffer& params, optim::Sgd* sgd) {
  HT_CHECK(params.device() == Device::CPU, "internal: checkpoints are applied before the model moves to a GPU");
  std::copy(t.values.begin(), t.values.end(), params.values().data());
  std::copy(t.states.begin(), t.states.end(), params.states().data());
  if (sgd) std::copy(t.momentum.begin(), t.momentum.end(), sgd->momentum_buffer().data());
}

}  // namespace hetrain::train
