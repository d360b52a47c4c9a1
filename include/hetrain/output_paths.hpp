// hetrain/output_paths.hpp — the one rule for every file a hetrain tool writes (docs/architecture.md,
// "Invariants": an output never replaces an input or a device node).
//
// Before any work, each output path is checked against every input and against the other outputs, and
// refused with one line when it
//   - is the same file as an input, or as another output (device and inode after symbolic links; a name
//     not written yet: its folder's absolute path with links resolved, plus its own name);
//   - exists and is not a regular file (a folder, a character or block device, a FIFO, a socket): the
//     tools write PATH.tmp-PID and rename it over PATH, which would replace a device node with a file;
//   - lies in a folder that does not exist, is not a folder, or cannot be written.
// data_tools/hetrain_output_paths.py is the same rule for the Python tools.
#pragma once

#include <string>
#include <vector>

namespace hetrain {

struct NamedPath {
  std::string option;  // "--metrics", "-o", "--data": what the message calls the path
  std::string path;
  std::string shown{};  // how an output is named in a message; empty: option + " " + path
  std::string name() const { return shown.empty() ? option + " " + path : shown; }
};

// The first problem of the outputs, as one line ("--metrics d.h5 is the same file as the input d.h5
// (--data): refusing to overwrite an input; choose another output"); "" when every output is fine. Inputs
// with an empty path are skipped (an option not given), and so are outputs.
std::string output_paths_problem(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);
// The same, thrown as hetrain::Error.
void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);
// Whether two paths name the same file (by device and inode when both exist, else by resolved name).
bool same_file(const std::string& a, const std::string& b);

}  // namespace hetrain
