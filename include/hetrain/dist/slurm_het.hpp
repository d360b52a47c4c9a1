// hetrain/dist/slurm_het.hpp — which component of a Slurm heterogeneous job a task belongs to.
//
// `srun --het-group=0,1` starts one step across the components of a heterogeneous job (jobs/hetjob.sbatch):
// one MPI world, task ids numbered component by component. Slurm 22.05 does not tell a task its component
// directly, so it is derived from what srun does export: SLURM_HET_SIZE, SLURM_NTASKS_HET_GROUP_k,
// SLURM_STEP_NUM_TASKS and SLURM_PROCID. See docs/architecture.md (launch).
#pragma once

#include <functional>
#include <string>

namespace hetrain::dist {

struct HetComponent {
  int index = -1;         // -1: not a step across all components of a heterogeneous job
  std::string partition;  // SLURM_JOB_PARTITION_HET_GROUP_k, when Slurm gives it
  // "1 (cpu)", or "" when index is -1: the rank table's component column.
  std::string label() const;
};

// Reads the variables through `env` (getenv by default, a map in the tests). A step that covers only some
// components (`--het-group=1`) cannot be placed by task id alone and gets index -1.
HetComponent slurm_het_component(const std::function<const char*(const char*)>& env);
HetComponent slurm_het_component();

}  // namespace hetrain::dist
