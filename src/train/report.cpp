#include "train/report.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/resources.hpp"

namespace hetrain::train {

MemoryFigures memory_figures() {
  constexpr double kMiB = 1024.0 * 1024.0;
  const ResidentMemory host = resident_memory();
  const cuda::DeviceMemoryUse device = cuda::device_memory_use();
  return {double(host.now_bytes) / kMiB, double(host.peak_bytes) / kMiB, double(device.in_use_bytes) / kMiB,
          double(device.peak_bytes) / kMiB};
}

std::string memory_summary(const std::vector<MemoryFigures>& per_rank) {
  if (per_rank.empty()) return "";
  size_t host = 0, device = 0;
  for (size_t r = 1; r < per_rank.size(); ++r) {
    if (per_rank[r].host_peak_mib > per_rank[host].host_peak_mib) host = r;
    if (per_rank[r].device_peak_mib > per_rank[device].device_peak_mib) device = r;
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string out = "memory: highest resident " + bytes_text(per_rank[host].host_peak_mib * kMiB) + " (rank " +
                    std::to_string(host) + " of " + std::to_string(per_rank.size()) + ")";
  if (per_rank[device].device_peak_mib > 0)
    out += "; hetrain's own GPU memory at most " + bytes_text(per_rank[device].device_peak_mib * kMiB) + " (rank " +
           std::to_string(device) + ")";
  return out;
}

int64_t StepRecord::global_batch() const {
  double b = 0;
  for (const auto& r : ranks) b += r.batch;
  return static_cast<int64_t>(b);
}

double StepRecord::balance_efficiency() const {
  if (ranks.empty() || step_seconds <= 0) return 0;
  double busy = 0;
  for (const auto& r : ranks) busy += r.compute;
  return busy / (double(ranks.size()) * step_seconds);
}

double StepRecord::exposed_share() const {
  if (step_seconds <= 0) return 0;
  double most = 0;
  for (const auto& r : ranks) most = std::max(most, r.exposed);
  return most / step_seconds;
}

MetricsFile::MetricsFile(const std::string& path) : path_(path), tmp_(path + ".tmp-" + std::to_string(::getpid())) {
  struct stat st {};
  HT_CHECK(::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode), "--metrics ", path, ": not a regular file");
  file_ = std::fopen(tmp_.c_str(), "w");
  HT_CHECK(file_ != nullptr, "--metrics ", path, ": cannot write ", tmp_, ": ", std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (file_) {  // not closed: the run failed; leave nothing that looks complete
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void MetricsFile::write(const StepRecord& r) {
  if (!file_ || !error_.empty()) return;
  auto list = [&](const char* key, auto field) {
    std::fprintf(file_, ",\"%s\":[", key);
    for (size_t i = 0; i < r.ranks.size(); ++i) std::fprintf(file_, "%s%.6g", i ? "," : "", field(r.ranks[i]));
    std::fprintf(file_, "]");
  };
  std::fprintf(file_, "{\"step\":%lld,\"epoch\":%lld,\"loss\":%.6g,\"accuracy\":%.6g,\"lr\":%.6g,\"step_s\":%.6g,"
               "\"samples_per_s\":%.6g,\"efficiency\":%.4f,\"exposed_share\":%.4f",
               (long long)r.step, (long long)r.epoch, r.loss, r.accuracy, r.lr, r.step_seconds,
               r.samples_per_second(), r.balance_efficiency(), r.exposed_share());
  list("b", [](const StepTimes& t) { return t.batch; });
  list("compute_s", [](const StepTimes& t) { return t.compute; });
  list("wait_s", [](const StepTimes& t) { return t.wait; });
  list("comm_s", [](const StepTimes& t) { return t.comm; });
  list("idle_s", [](const StepTimes& t) { return t.idle; });
  list("exposed_s", [](const StepTimes& t) { return t.exposed; });
  list("host_mib", [](const StepTimes& t) { return t.memory.host_mib; });
  list("host_peak_mib", [](const StepTimes& t) { return t.memory.host_peak_mib; });
  list("device_mib", [](const StepTimes& t) { return t.memory.device_mib; });
  list("device_peak_mib", [](const StepTimes& t) { return t.memory.device_peak_mib; });
  if (r.val_accuracy >= 0) std::fprintf(file_, ",\"val_loss\":%.6g,\"val_accuracy\":%.6g", r.val_loss, r.val_accuracy);
  if (r.loss_scale > 0)
    std::fprintf(file_, ",\"loss_scale\":%.6g,\"skipped\":%s", r.loss_scale, r.skipped ? "true" : "false");
  end_line();
}

void MetricsFile::write(const ElasticRecord& r) {
  if (!file_ || !error_.empty()) return;
  auto list = [&](const char* key, auto field) {
    std::fprintf(file_, ",\"%s\":[", key);
    for (size_t i = 0; i < r.ranks.size(); ++i) std::fprintf(file_, "%s%.6g", i ? "," : "", double(field(r.ranks[i])));
    std::fprintf(file_, "]");
  };
  double samples = 0, pushes = 0, staleness = 0, compute = 0;
  for (const auto& k : r.ranks) samples += k.samples, pushes += k.pushes, staleness += k.staleness, compute += k.compute;
  const double seconds = r.window_s > 0 ? r.window_s : 0;
  auto rate = [&](double n) { return seconds > 0 ? n / seconds : 0.0; };
  std::fprintf(file_, "{\"mode\":\"%s\",\"step\":%lld,\"epoch\":%lld,\"samples\":%lld,\"loss\":%.6g,\"accuracy\":%.6g,"
               "\"lr\":%.6g,\"step_s\":%.6g,\"samples_per_s\":%.6g,\"efficiency\":%.4f,\"staleness\":%.6g",
               r.mode.c_str(), (long long)r.step, (long long)r.epoch, (long long)r.samples, r.loss, r.accuracy, r.lr,
               seconds, rate(samples), seconds > 0 && !r.ranks.empty() ? compute / (seconds * double(r.ranks.size())) : 0.0,
               pushes > 0 ? staleness / pushes : 0.0);
  list("group", [](const ElasticRecord::Rank& k) { return k.group; });
  list("b", [](const ElasticRecord::Rank& k) { return k.samples; });
  list("rank_samples_per_s", [&](const ElasticRecord::Rank& k) { return rate(k.samples); });
  list("group_samples_per_s", [&](const ElasticRecord::Rank& k) { return rate(k.group_samples); });
  list("pushes", [](const ElasticRecord::Rank& k) { return k.pushes; });
  list("rank_staleness", [](const ElasticRecord::Rank& k) { return k.pushes > 0 ? k.staleness / k.pushes : 0.0; });
  list("compute_s", [](const ElasticRecord::Rank& k) { return k.compute; });
  list("wait_s", [](const ElasticRecord::Rank& k) { return k.wait; });
  list("comm_s", [](const ElasticRecord::Rank& k) { return k.comm; });
  list("idle_s", [](const ElasticRecord::Rank& k) { return k.idle; });
  list("host_mib", [](const ElasticRecord::Rank& k) { return k.memory.host_mib; });
  list("host_peak_mib", [](const ElasticRecord::Rank& k) { return k.memory.host_peak_mib; });
  list("device_mib", [](const ElasticRecord::Rank& k) { return k.memory.device_mib; });
  list("device_peak_mib", [](const ElasticRecord::Rank& k) { return k.memory.device_peak_mib; });
  if (r.loss_scale > 0) {
    std::fprintf(file_, ",\"loss_scale\":%.6g", r.loss_scale);
    list("skipped", [](const ElasticRecord::Rank& k) { return k.skipped; });
  }
  if (r.val_accuracy >= 0) std::fprintf(file_, ",\"val_loss\":%.6g,\"val_accuracy\":%.6g", r.val_loss, r.val_accuracy);
  end_line();
}

void MetricsFile::end_line() {
  if (std::fprintf(file_, "}\n") < 0 || std::fflush(file_) != 0 || std::ferror(file_))
    error_ = "--metrics: writing " + tmp_ + " failed: " + std::strerror(errno);
}

void MetricsFile::close() {
  if (!file_) return;
  bool ok = std::fflush(file_) == 0;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok && error_.empty()) error_ = "--metrics: writing " + tmp_ + " failed: " + std::strerror(errno);
  if (!error_.empty()) std::remove(tmp_.c_str());
  HT_CHECK(error_.empty(), error_);
  HT_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, "--metrics: cannot rename ", tmp_, " to ", path_, ": ",
           std::strerror(errno));
}

}  // namespace hetrain::train
