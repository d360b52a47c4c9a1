// hetrain eval --save-json: a detector's detections as COCO results, the list pycocotools' loadRes takes —
// [{"image_id", "category_id", "bbox": [x, y, width, height], "score"}] — with the boxes mapped from the
// letterboxed network input back to each original image's pixels (docs/detection.md, "COCO-format
// predictions").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/detect.hpp"

namespace hetrain::train {

// A box on the size × size letterboxed image of a width × height original, in the original's pixels,
// clipped to it.
detect::Box unletterbox(const detect::Box& box, int width, int height, int size);

class CocoResults {
 public:
  // `origins`: the dataset's (data::read_image_origins). Without them the ids are the images' indices in
  // the dataset, the boxes stay in its letterboxed images' pixels and the categories are the class indices.
  CocoResults(data::ImageOrigins origins, int image_size, int64_t images);
  // Image `index` of the dataset (in any order), its detections as NMS left them.
  void add_image(int64_t index, const std::vector<detect::Detection>& dets);
  // Writes the JSON list to `path` atomically (PATH.tmp-PID, renamed); throws naming the path.
  void write(const std::string& path) const;
  int64_t detections() const { return int64_t(records_.size()); }
  bool mapped() const { return origins_.present; }

 private:
  struct Record {
    int64_t image_id, category_id;
    double x, y, w, h, score;
  };
  data::ImageOrigins origins_;
  int size_;
  int64_t images_;
  std::vector<Record> records_;
};

}  // namespace hetrain::train
