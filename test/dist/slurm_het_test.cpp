// The component of a Slurm heterogeneous job, derived from srun's variables (values as Slurm 22.05 sets them).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hetrain/dist/slurm_het.hpp"

using namespace hetrain::dist;

namespace {
struct Env {
  std::map<std::string, std::string> vars;
  HetComponent component() const {
    return slurm_het_component([this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  }
};

// Two components: 2 tasks in partition gpu, 3 in partition cpu, and a step over both (5 tasks).
Env two_components(int task) {
  return Env{{{"SLURM_HET_SIZE", "2"},
              {"SLURM_NTASKS_HET_GROUP_0", "2"},
              {"SLURM_NTASKS_HET_GROUP_1", "3"},
              {"SLURM_JOB_PARTITION_HET_GROUP_0", "gpu"},
              {"SLURM_JOB_PARTITION_HET_GROUP_1", "cpu"},
              {"SLURM_STEP_NUM_TASKS", "5"},
              {"SLURM_PROCID", std::to_string(task)}}};
}
}  // namespace

TEST(SlurmHet, TasksAreNumberedComponentByComponent) {
  EXPECT_EQ(two_components(0).component().index, 0);
  EXPECT_EQ(two_components(1).component().index, 0);
  EXPECT_EQ(two_components(2).component().index, 1);
  EXPECT_EQ(two_components(4).component().index, 1);
  EXPECT_EQ(two_components(1).component().label(), "0 (gpu)");
  EXPECT_EQ(two_components(3).component().label(), "1 (cpu)");
}

TEST(SlurmHet, NoComponentOutsideAHeterogeneousJob) {
  Env plain{{{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}}};
  EXPECT_EQ(plain.component().index, -1);
  EXPECT_EQ(plain.component().label(), "");
  EXPECT_EQ(Env{}.component().index, -1);
}

TEST(SlurmHet, AStepOverSomeComponentsIsNotPlaced) {
  Env e = two_components(0);
  e.vars["SLURM_STEP_NUM_TASKS"] = "3";  // srun --het-group=1 only
  EXPECT_EQ(e.component().index, -1);
}

TEST(SlurmHet, MalformedCountsAreIgnored) {
  Env e = two_components(2);
  e.vars["SLURM_NTASKS_HET_GROUP_1"] = "3(x2)";
  EXPECT_EQ(e.component().index, -1);
  Env no_partition = two_components(2);
  no_partition.vars.erase("SLURM_JOB_PARTITION_HET_GROUP_1");
  EXPECT_EQ(no_partition.component().label(), "1");
}
