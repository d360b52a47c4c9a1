// data/shard.hpp — one open file of a Dataset (a single file or one shard of a set): what Dataset's
// readers (src/data/dataset.cpp, src/data/jpeg_read.cpp) hold of it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/boxes.hpp"
#include "data/h5util.hpp"
#include "data/mapped_images.hpp"
#include "hetrain/data.hpp"

namespace hetrain::data {

struct Dataset::Shard {
  std::string path;
  int64_t count = 0;
  h5::Id file, images;
  std::unique_ptr<MappedImages> mapped;  // null: read /images with H5Dread (compressed, unusual layout)
  FileWatch watch;                       // unmapped shards (a mapped one's map watches its file)
  std::vector<int32_t> labels;
  FileBoxes boxes;  // detection datasets only
  h5::Id jpeg;                        // JPEG datasets: /jpeg, the images' bytes one after another ...
  std::vector<int64_t> jpeg_offsets;  // ... sample i at [jpeg_offsets[i], jpeg_offsets[i+1]) (in memory)
  // Throws "<file>: changed or truncated while reading" when the file's size or mtime changed since open.
  void check_unchanged() const {
    if (mapped) mapped->check_unchanged();
    else watch.check();
  }
};

}  // namespace hetrain::data
