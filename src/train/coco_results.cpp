#include "train/coco_results.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "data/image.hpp"
#include "hetrain/error.hpp"

namespace hetrain::train {

detect::Box unletterbox(const detect::Box& box, int width, int height, int size) {
  const data::Placement p = data::letterbox_placement(width, height, size);
  auto x = [&](float v) { return float(std::clamp((double(v) - p.pad_x) / p.scale_x, 0.0, double(width))); };
  auto y = [&](float v) { return float(std::clamp((double(v) - p.pad_y) / p.scale_y, 0.0, double(height))); };
  return {x(box.x0), y(box.y0), x(box.x1), y(box.y1)};
}

CocoResults::CocoResults(data::ImageOrigins origins, int image_size, int64_t images)
    : origins_(std::move(origins)), size_(image_size), images_(images) {
  HT_CHECK(!origins_.present || int64_t(origins_.image_ids.size()) == images, "--save-json: the dataset records ",
           origins_.image_ids.size(), " image origins for ", images, " images");
}

void CocoResults::add_image(int64_t index, const std::vector<detect::Detection>& dets) {
  HT_CHECK(index >= 0 && index < images_, "--save-json: image ", index, " outside the ", images_, " evaluated");
  for (const detect::Detection& d : dets) {
    detect::Box b = d.box;
    int64_t image_id = index, category = d.cls;
    if (origins_.present) {
      b = unletterbox(b, origins_.sizes[2 * size_t(index)], origins_.sizes[2 * size_t(index) + 1], size_);
      image_id = origins_.image_ids[size_t(index)];
    }
    if (!origins_.category_ids.empty()) {
      HT_CHECK(d.cls >= 0 && size_t(d.cls) < origins_.category_ids.size(), "--save-json: class ", d.cls,
               " has no category id in the dataset");
      category = origins_.category_ids[size_t(d.cls)];
    }
    records_.push_back({image_id, category, b.x0, b.y0, double(b.x1) - b.x0, double(b.y1) - b.y0, d.score});
  }
}

void CocoResults::write(const std::string& path) const {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  HT_CHECK(f, "--save-json ", path, ": cannot create ", tmp, ": ", std::strerror(errno));
  // Two decimals of a pixel and five of a score, as YOLOv5's val.py rounds them.
  std::fputs("[", f);
  for (size_t i = 0; i < records_.size(); ++i) {
    const Record& r = records_[i];
    std::fprintf(f, "%s\n{\"image_id\": %lld, \"category_id\": %lld, \"bbox\": [%.2f, %.2f, %.2f, %.2f], \"score\": %.5f}",
                 i ? "," : "", (long long)r.image_id, (long long)r.category_id, r.x, r.y, r.w, r.h, r.score);
  }
  std::fputs("\n]\n", f);
  const bool ok = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = ok ? errno : err;
    std::remove(tmp.c_str());
    HT_THROW("--save-json ", path, ": cannot write: ", std::strerror(why));
  }
}

}  // namespace hetrain::train
