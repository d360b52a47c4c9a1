// src/cuda/common/gpu_sharing.cpp — the one-rank-per-GPU rule of hetrain/cuda.hpp. Pure code, built in
// every configuration (a CPU-only build must be able to judge what GPU ranks elsewhere report).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"

namespace hetrain {

// Tab-separated: host names and UUIDs hold no tabs.
std::string gpu_claim_text(const GpuClaim& c) {
  HT_CHECK(c.host.find_first_of("\t\n") == std::string::npos && c.gpu.find_first_of("\t\n") == std::string::npos,
           "gpu_claim_text: a tab or newline in host '", c.host, "' or GPU '", c.gpu, "'");
  return c.host + "\t" + std::to_string(c.local_rank) + "\t" + std::to_string(c.visible) + "\t" + c.gpu;
}

GpuClaim parse_gpu_claim(const std::string& text) {
  std::vector<std::string> f;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, '\t')) f.push_back(field);
  if (!text.empty() && text.back() == '\t') f.push_back("");  // getline drops an empty last field
  HT_CHECK(f.size() == 4, "internal: malformed GPU claim '", text, "'");
  GpuClaim c;
  c.host = f[0];
  try {
    c.local_rank = std::stoi(f[1]);
    c.visible = std::stoi(f[2]);
  } catch (const std::exception&) {
    HT_THROW("internal: malformed GPU claim '", text, "'");
  }
  c.gpu = f[3];
  return c;
}

std::string gpu_sharing_error(const std::vector<GpuClaim>& ranks) {
  // UUIDs are unique across machines, so a UUID claimed twice is a shared GPU whatever the host names say
  // (two "nodes" of a test cluster may be one machine). The first such pair in the order given is reported.
  std::map<std::string, size_t> first_claim;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const GpuClaim& c = ranks[i];
    if (c.gpu.empty()) continue;
    auto [it, fresh] = first_claim.emplace(c.gpu, i);
    if (fresh) continue;
    const GpuClaim& other = ranks[it->second];
    const std::string& host = other.host;
    std::set<std::string> gpus;
    int gpu_ranks = 0, visible = 0;
    for (const GpuClaim& r : ranks) {
      if (r.host != host || r.gpu.empty()) continue;
      ++gpu_ranks;
      visible = std::max(visible, r.visible);
      gpus.insert(r.gpu);
    }
    const int count = std::max<int>(visible, int(gpus.size()));
    std::ostringstream os;
    os << "node " << host << " has " << count << (count == 1 ? " GPU" : " GPUs") << " for its " << gpu_ranks
       << " GPU ranks: local ranks " << other.local_rank << " and " << c.local_rank
       << (c.host == host ? std::string() : " (on " + c.host + ")") << " would both train on " << c.gpu
       << " (NCCL refuses a GPU used twice, and both would size their batches from the same free memory): start "
       << "at most " << count << (count == 1 ? " rank" : " ranks") << " on that node (Slurm: --ntasks-per-node="
       << count << " --gpus-per-node=" << count << "), or give the extra ranks --device cpu";
    return os.str();
  }
  return "";
}

}  // namespace hetrain
