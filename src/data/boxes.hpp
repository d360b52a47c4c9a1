// data/boxes.hpp — the detection part of the dataset format (docs/dataset-format.md, "Detection
// datasets"): the rule a box must satisfy, and reading + validating /boxes and /box_offsets of one file.
// The writer (data/writer.hpp) checks boxes with the same rule, so hetrain-pack never writes a file that
// Dataset::open would refuse.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::data {

// What is wrong with one box (class, cx, cy, w, h), or "" when nothing is: the class must be an integer in
// [0, num_classes), every value finite, w and h positive, and the box must lie inside [0, 1] (its edges
// cx ± w/2 and cy ± h/2 may pass the image border by float rounding only, kBoxEdgeSlack).
constexpr float kBoxEdgeSlack = 1e-5f;
std::string box_problem(const float* box, int num_classes);

// The boxes of one file: rows [M, 5] and offsets [n + 1].
struct FileBoxes {
  std::vector<float> rows;
  std::vector<int64_t> offsets;
};

// Reads /boxes and /box_offsets of a file that holds n samples and checks them: types and shapes, offsets
// starting at 0, never decreasing and ending at M (and at the file's `num_boxes` attribute when present),
// every box by box_problem(). Errors are one line naming `path` and the entry. Caller holds the HDF5 mutex.
FileBoxes read_file_boxes(hid_t file, const std::string& path, int64_t n, int num_classes);

// Appends the boxes of sample `local_index` of the file to rows, and their new end to offsets (which must
// already hold the start, 0 for the first sample).
void append_sample_boxes(const FileBoxes& from, int64_t local_index, std::vector<float>& rows,
                         std::vector<int64_t>& offsets);

}  // namespace hetrain::data
