// data_tools/tools.hpp — the sub-commands of hetrain-pack (one file each).
#pragma once

#include <string>
#include <vector>

namespace hetrain::tools {
// `hetrain-pack inspect FILE [--verify]`; returns the exit code.
int inspect_main(const std::vector<std::string>& args);
}  // namespace hetrain::tools
