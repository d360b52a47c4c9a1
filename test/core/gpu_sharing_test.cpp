// test/core/gpu_sharing_test.cpp — the one-rank-per-GPU rule (hetrain/cuda.hpp, src/cuda/common/): pure
// functions, so they run in every build configuration and without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;

namespace {
GpuClaim claim(const std::string& host, int local_rank, int visible, const std::string& gpu) {
  GpuClaim c;
  c.host = host, c.local_rank = local_rank, c.visible = visible, c.gpu = gpu;
  return c;
}
std::string uuid(int i) { return "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd"; }

// Ranks of `nodes` nodes with `ranks` ranks each, every node seeing `gpus` GPUs, each rank taking GPU
// local_rank % gpus as cuda_select_device does. UUIDs differ between nodes.
std::vector<GpuClaim> job(int nodes, int ranks, int gpus) {
  std::vector<GpuClaim> all;
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < ranks; ++r)
      all.push_back(claim("gpu0" + std::to_string(n), r, gpus, uuid(10 * n + r % gpus)));
  return all;
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST(GpuSharing, OneRankPerGpuPasses) {
  EXPECT_EQ(gpu_sharing_error(job(2, 4, 4)), "");
  EXPECT_EQ(gpu_sharing_error(job(1, 2, 8)), "");  // fewer ranks than GPUs
  EXPECT_EQ(gpu_sharing_error({}), "");
}

// Slurm's per-task binding: each rank sees only its own GPU and calls it cuda:0. Comparing indices or
// counting GPUs per rank would refuse this; the UUIDs differ, so it passes.
TEST(GpuSharing, PerTaskBindingPasses) {
  std::vector<GpuClaim> all;
  for (int r = 0; r < 4; ++r) all.push_back(claim("gpu01", r, 1, uuid(r)));
  EXPECT_EQ(gpu_sharing_error(all), "");
}

// jobs/train.sbatch's old example: --ntasks-per-node=8 on 4-GPU nodes.
TEST(GpuSharing, EightRanksOnFourGpusAreRefusedWithOneClearLine) {
  const std::string why = gpu_sharing_error(job(4, 8, 4));
  ASSERT_NE(why, "");
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_TRUE(has(why, "node gpu00 has 4 GPUs for its 8 GPU ranks")) << why;
  EXPECT_TRUE(has(why, "local ranks 0 and 4")) << why;
  EXPECT_TRUE(has(why, uuid(0))) << why;
  EXPECT_TRUE(has(why, "--ntasks-per-node=4")) << why;
  EXPECT_TRUE(has(why, "--device cpu")) << why;
}

TEST(GpuSharing, NamesTheNodeThatShares) {
  std::vector<GpuClaim> all = job(1, 2, 2);
  all.push_back(claim("gpu07", 0, 1, uuid(70)));
  all.push_back(claim("gpu07", 1, 1, uuid(70)));  // CUDA_VISIBLE_DEVICES=0 for both ranks
  const std::string why = gpu_sharing_error(all);
  EXPECT_TRUE(has(why, "node gpu07 has 1 GPU for its 2 GPU ranks: local ranks 0 and 1")) << why;
  EXPECT_TRUE(has(why, "at most 1 rank on that node")) << why;
}

// CPU ranks claim nothing: a mixed job on one machine (one CPU rank, one GPU rank) passes, and so does a
// node of CPU ranks only.
TEST(GpuSharing, CpuRanksNeverConflict) {
  EXPECT_EQ(gpu_sharing_error({claim("n1", 0, 0, ""), claim("n1", 1, 1, uuid(1))}), "");
  EXPECT_EQ(gpu_sharing_error({claim("n1", 0, 0, ""), claim("n1", 1, 0, ""), claim("n1", 2, 0, "")}), "");
  // A CPU rank on a node whose two GPU ranks share: counted out of the GPU ranks.
  const std::string why =
      gpu_sharing_error({claim("n1", 0, 2, ""), claim("n1", 1, 2, uuid(1)), claim("n1", 2, 2, uuid(1))});
  EXPECT_TRUE(has(why, "has 2 GPUs for its 2 GPU ranks: local ranks 1 and 2")) << why;
}

// Two test-cluster "nodes" that are one machine: different host names, the same GPU.
TEST(GpuSharing, OneGpuUnderTwoHostNamesIsShared) {
  const std::string why = gpu_sharing_error({claim("node1", 0, 1, uuid(3)), claim("node2", 0, 1, uuid(3))});
  EXPECT_TRUE(has(why, "node node1")) << why;
  EXPECT_TRUE(has(why, "(on node2)")) << why;
}

TEST(GpuSharing, ClaimTextRoundTrips) {
  for (const GpuClaim& c : {claim("gpu01.cluster", 3, 4, uuid(2)), claim("cpu9", 0, 0, "")}) {
    const GpuClaim back = parse_gpu_claim(gpu_claim_text(c));
    EXPECT_EQ(back.host, c.host);
    EXPECT_EQ(back.local_rank, c.local_rank);
    EXPECT_EQ(back.visible, c.visible);
    EXPECT_EQ(back.gpu, c.gpu);
  }
  EXPECT_THROW(parse_gpu_claim("host\t1"), Error);
  EXPECT_THROW(parse_gpu_claim("host\tx\t1\tGPU-1"), Error);
  EXPECT_THROW(gpu_claim_text(claim("bad\thost", 0, 0, "")), Error);
}
