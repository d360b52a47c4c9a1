#include "train/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hetrain/error.hpp"
#include "hetrain/output_paths.hpp"

namespace hetrain::train {

namespace {

std::string per_rank(const std::string& pattern, int rank) {
  std::string out = pattern;
  const size_t at = out.find("%r");
  if (at != std::string::npos) out.replace(at, 2, std::to_string(rank));
  return out;
}

// A --model that names a file (a YAML model) is an input; a zoo name is not.
void add_model_file(std::vector<NamedPath>& inputs, const std::string& model) {
  struct stat st {};
  if (!model.empty() && ::stat(model.c_str(), &st) == 0) inputs.push_back({"--model", model});
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_train_outputs(const TrainConfig& cfg, int rank) {
  std::vector<NamedPath> inputs = {{"--data", cfg.data_path}, {"--val", cfg.val_path},
                                   {"--init-from", cfg.init_from}, {"--config", cfg.config_path}};
  if (cfg.resume != "auto") inputs.push_back({"--resume", cfg.resume});
  add_model_file(inputs, cfg.model);
  std::vector<NamedPath> outputs;
  if (rank == 0) outputs.push_back({"--metrics", cfg.metrics_path});
  if (!cfg.dump_samples.empty()) outputs.push_back({"--dump-samples", per_rank(cfg.dump_samples, rank)});
  if (!cfg.dump_params.empty() && (cfg.dump_params.find("%r") != std::string::npos || rank == 0))
    outputs.push_back({"--dump-params", per_rank(cfg.dump_params, rank)});
  check_output_paths(outputs, inputs);
  // Checkpoints: rank 0 writes DIR/checkpoint-SSSSSSSS.h5 and prunes old ones, so an input under such a name in
  // that folder could be replaced or deleted (--resume's file is continued from: later steps, other names).
  if (cfg.checkpoint_dir.empty() || rank != 0) return;
  for (const NamedPath& in : inputs) {
    if (in.path.empty() || in.option == "--resume") continue;
    const size_t slash = in.path.find_last_of('/');
    const std::string base = slash == std::string::npos ? in.path : in.path.substr(slash + 1);
    if (base.compare(0, 11, "checkpoint-") == 0 && same_file(folder_of(in.path), cfg.checkpoint_dir))
      HT_THROW("--checkpoint-dir ", cfg.checkpoint_dir, " holds the input ", in.path, " (", in.option,
               ") under a checkpoint's name, which this run's checkpoints would overwrite or prune: refusing to "
               "overwrite an input; copy it elsewhere or choose another --checkpoint-dir");
  }
}

void check_eval_outputs(const EvalConfig& cfg) {
  std::vector<NamedPath> inputs = {{"--checkpoint", cfg.checkpoint}, {"--weights", cfg.weights},
                                   {"--data", cfg.data_path}};
  add_model_file(inputs, cfg.model);
  check_output_paths({{"--dump-batch", cfg.dump_batch}, {"--save-json", cfg.save_json}}, inputs);
}

void check_output_path(const std::string& path, const char* option) {
  HT_CHECK(!path.empty(), option, ": empty path");
  struct stat st {};
  HT_CHECK(::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode), option, " ", path, ": exists and is not a file");
  const std::string probe = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  HT_CHECK(fd >= 0, option, " ", path, ": cannot write there: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomically(const std::string& path, const void* bytes, size_t size, const char* option) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  HT_CHECK(f, option, " ", path, ": cannot write ", tmp, ": ", std::strerror(errno));
  bool ok = std::fwrite(bytes, 1, size, f) == size;
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  const int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::remove(tmp.c_str());
  HT_CHECK(ok, option, " ", path, ": writing failed: ", std::strerror(err));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    std::remove(tmp.c_str());
    HT_THROW(option, " ", path, ": cannot rename ", tmp, ": ", std::strerror(rename_err));
  }
}

Outputs::Outputs(const TrainConfig& cfg, const dist::World& world) : cfg_(cfg), world_(world) {
  dist::agree_on(world.comm(), [&] {
    if (!cfg.metrics_path.empty() && world.rank() == 0) metrics_ = std::make_unique<MetricsFile>(cfg.metrics_path);
    if (!cfg.dump_samples.empty()) {
      samples_path_ = per_rank_path(cfg.dump_samples);
      samples_ = std::make_unique<std::ofstream>(samples_path_);
      HT_CHECK(samples_->good(), "--dump-samples ", samples_path_, ": cannot write: ", std::strerror(errno));
    }
    if (writes_params()) check_output_path(per_rank_path(cfg.dump_params), "--dump-params");
  });
}

Outputs::~Outputs() = default;

std::string Outputs::per_rank_path(const std::string& pattern) const {
  std::string out = pattern;
  const size_t at = out.find("%r");
  if (at != std::string::npos) out.replace(at, 2, std::to_string(world_.rank()));
  return out;
}

bool Outputs::writes_params() const {
  if (cfg_.dump_params.empty()) return false;
  return per_rank_path(cfg_.dump_params) != cfg_.dump_params || world_.rank() == 0;  // one file: rank 0's
}

void Outputs::log_samples(int64_t epoch, const std::vector<int64_t>& indices) {
  if (!samples_) return;
  for (int64_t i : indices) *samples_ << epoch << ' ' << i << '\n';
}

void Outputs::write_metrics(const StepRecord& record) {
  if (metrics_) metrics_->write(record);
}

void Outputs::write_metrics(const ElasticRecord& record) {
  if (metrics_) metrics_->write(record);
}

void Outputs::fail_agreed() const {
  if (metrics_ && !metrics_->error().empty()) throw AgreedError(metrics_->error(), __FILE__, __LINE__);
  throw AgreedError("rank 0 could not write its outputs", __FILE__, __LINE__);
}

void Outputs::finish(const nn::ParamBuffer& params) {
  // Parameters are identical on every rank (invariant 3); each writer takes its own copy to the host.
  const Tensor values = writes_params() ? params.values().to(Device::CPU) : Tensor();
  dist::agree_on(world_.comm(), [&] {
    if (metrics_) metrics_->close();
    if (samples_) {
      samples_->flush();
      HT_CHECK(samples_->good(), "--dump-samples ", samples_path_, ": writing failed");
      samples_.reset();
    }
    if (writes_params())
      write_file_atomically(per_rank_path(cfg_.dump_params), values.data(), size_t(values.numel()) * sizeof(float),
                            "--dump-params");
  });
}

}  // namespace hetrain::train
