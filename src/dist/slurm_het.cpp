// Slurm heterogeneous-job component of this task, from srun's environment.
#include "hetrain/dist/slurm_het.hpp"

#include <cstdlib>
#include <string>

namespace hetrain::dist {
namespace {
// A non-negative integer variable, or -1 when it is absent or not a plain number.
long read_count(const std::function<const char*(const char*)>& env, const std::string& name) {
  const char* text = env(name.c_str());
  if (!text || !*text) return -1;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  return (*end == '\0' && v >= 0) ? v : -1;
}
}  // namespace

std::string HetComponent::label() const {
  if (index < 0) return "";
  return partition.empty() ? std::to_string(index) : std::to_string(index) + " (" + partition + ")";
}

HetComponent slurm_het_component(const std::function<const char*(const char*)>& env) {
  HetComponent none;
  const long components = read_count(env, "SLURM_HET_SIZE");
  const long task = read_count(env, "SLURM_PROCID");
  const long step_tasks = read_count(env, "SLURM_STEP_NUM_TASKS");
  if (components < 2 || task < 0 || step_tasks <= 0) return none;
  long first_task = 0;  // task ids run through component 0, then 1, ...
  HetComponent mine;
  for (long k = 0; k < components; ++k) {
    const long tasks = read_count(env, "SLURM_NTASKS_HET_GROUP_" + std::to_string(k));
    if (tasks <= 0) return none;
    if (mine.index < 0 && task < first_task + tasks) {
      mine.index = int(k);
      const char* partition = env(("SLURM_JOB_PARTITION_HET_GROUP_" + std::to_string(k)).c_str());
      if (partition) mine.partition = partition;
    }
    first_task += tasks;
  }
  // A step over only some components numbers its tasks from 0 as well: the sums would not match.
  return first_task == step_tasks ? mine : none;
}

HetComponent slurm_het_component() {
  return slurm_het_component([](const char* name) { return std::getenv(name); });
}

}  // namespace hetrain::dist
