// COCO-format object detection: an instances JSON file (images, annotations, categories) and a folder of
// JPEG/PNG images (docs/detection.md, "COCO-format data: `hetrain-pack coco`"). The JSON is parsed once, into the list
// of images (ordered by id, so every rank sees the same order) and their boxes in pixels; the images are
// decoded and letterboxed when a sample is asked for.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
using json = nlohmann::json;
constexpr uint8_t kLetterboxFill = 114;
// COCO's boxes are floats that may pass the border by rounding: up to this many pixels are clipped silently;
// a box further outside is an error.
constexpr double kBorderSlack = 1.0;

struct CocoBox {
  double x0, y0, x1, y1;  // pixels, clipped to the image
  int32_t cls;
};
struct CocoImage {
  int64_t id = 0;
  std::string file;
  int width = 0, height = 0;
  std::vector<CocoBox> boxes;
};

// `node[key]` as a T, or one line naming the file and the entry ("images[3]") that lacks it.
template <typename T>
T field(const json& node, const char* key, const std::string& file, const std::string& entry) {
  const auto it = node.find(key);
  HT_CHECK(it != node.end(), file, ": ", entry, " has no '", key, "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    HT_THROW(file, ": ", entry, ": '", key, "' has the wrong type (", it->type_name(), ")");
  }
}

json parse_file(const std::string& path) {
  std::ifstream in(path);
  HT_CHECK(in, path, ": cannot open the annotations file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    HT_THROW(path, ": not valid JSON: ", e.what());
  }
}

const json& array_of(const json& root, const char* key, const std::string& path) {
  HT_CHECK(root.is_object() && root.contains(key) && root[key].is_array(), path, ": no '", key,
           "' array (not a COCO instances file?)");
  return root[key];
}

class CocoSource : public SampleSource {
 public:
  CocoSource(const std::string& images_dir, const std::string& annotations, int size, int channels,
             int64_t max_pixels)
      : size_(size), max_pixels_(max_pixels) {
    HT_CHECK(max_pixels >= 0, "--max-pixels must be 0 (no limit) or positive, got ", max_pixels);
    HT_CHECK(size > 0, "--size must be positive, got ", size);
    HT_CHECK(channels == 1 || channels == 3, "--channels must be 1 or 3, got ", channels);
    check_sample_shape("--size " + std::to_string(size), channels, size, size);
    std::error_code ec;
    HT_CHECK(std::filesystem::is_directory(images_dir, ec), images_dir, ": not a folder (--images)");
    const json root = parse_file(annotations);
    read_categories(array_of(root, "categories", annotations), annotations);
    read_images(array_of(root, "images", annotations), annotations, images_dir);
    read_annotations(array_of(root, "annotations", annotations), annotations);
    meta.channels = channels;
    meta.height = meta.width = size;
    meta.has_boxes = true;
    meta.has_origins = true;
    meta.source = "coco: " + annotations + " + " + images_dir + " (letterboxed to " + std::to_string(size) + ")";
  }
  int64_t size() const override { return int64_t(images_.size()); }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    std::vector<float> boxes;
    get_boxed(i, image, label, boxes);
  }
  SampleOrigin origin(int64_t i) const override {
    const CocoImage& ci = images_[size_t(i)];
    return {ci.id, int32_t(ci.width), int32_t(ci.height)};
  }
  void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const override {
    const CocoImage& ci = images_[size_t(i)];
    const Image img = decode_image(ci.file, meta.channels, max_pixels_);
    HT_CHECK(img.width == ci.width && img.height == ci.height, shown_name(ci.file), ": the image is ", img.width, "x", img.height,
             " but the annotations say ", ci.width, "x", ci.height, " (image id ", ci.id, ")");
    const Placement p = letterbox(img, size_, kLetterboxFill, image);
    boxes.clear();
    for (const CocoBox& b : ci.boxes) {
      const double x0 = b.x0 * p.scale_x + p.pad_x, x1 = b.x1 * p.scale_x + p.pad_x;
      const double y0 = b.y0 * p.scale_y + p.pad_y, y1 = b.y1 * p.scale_y + p.pad_y;
      boxes.insert(boxes.end(), {float(b.cls), float((x0 + x1) / 2 / size_), float((y0 + y1) / 2 / size_),
                                 float((x1 - x0) / size_), float((y1 - y0) / size_)});
    }
    *label = label_of_boxes(boxes);
  }

 private:
  // Contiguous classes 0..K-1 in increasing category id; the names are kept.
  void read_categories(const json& cats, const std::string& path) {
    std::map<int64_t, std::string> by_id;
    for (size_t k = 0; k < cats.size(); ++k) {
      const std::string entry = "categories[" + std::to_string(k) + "]";
      const int64_t id = field<int64_t>(cats[k], "id", path, entry);
      HT_CHECK(by_id.emplace(id, field<std::string>(cats[k], "name", path, entry)).second, path, ": ", entry,
               ": category id ", id, " appears twice");
    }
    HT_CHECK(!by_id.empty(), path, ": no categories");
    for (const auto& [id, name] : by_id) {
      meta.category_ids.push_back(id);
      class_of_[id] = int32_t(meta.class_names.size());
      meta.class_names.push_back(name);
    }
    meta.num_classes = int(meta.class_names.size());
  }

  void read_images(const json& imgs, const std::string& path, const std::string& dir) {
    for (size_t k = 0; k < imgs.size(); ++k) {
      const std::string entry = "images[" + std::to_string(k) + "]";
      CocoImage ci;
      ci.id = field<int64_t>(imgs[k], "id", path, entry);
      const std::string name = field<std::string>(imgs[k], "file_name", path, entry);
      HT_CHECK(name.find('\0') == std::string::npos, path, ": ", entry, " (id ", ci.id, "): file_name ", quoted(name),
               " holds a NUL byte (no file has such a name)");
      // An annotation file must not open files outside --images (it may come from anyone). The check is on
      // the name: no absolute path, no ".." that climbs above the folder. Symbolic links inside the folder
      // are followed on purpose (folders of links to the images are common); whoever can place them there
      // controls the folder anyway.
      const std::filesystem::path rel = std::filesystem::path(name).lexically_normal();
      HT_CHECK(!rel.empty() && !rel.is_absolute() && *rel.begin() != "..", path, ": ",
               entry, " (id ", ci.id, "): file_name ", quoted(name), " leaves the --images folder",
               " (it must be a path inside it)");
      ci.file = (std::filesystem::path(dir) / rel).string();
      ci.width = field<int>(imgs[k], "width", path, entry);
      ci.height = field<int>(imgs[k], "height", path, entry);
      HT_CHECK(ci.width > 0 && ci.height > 0, path, ": ", entry, " (id ", ci.id, "): size ", ci.width, "x", ci.height,
               " is not positive");
      images_.push_back(std::move(ci));
    }
    HT_CHECK(!images_.empty(), path, ": no images (empty dataset)");
    std::sort(images_.begin(), images_.end(), [](const CocoImage& a, const CocoImage& b) { return a.id < b.id; });
    for (size_t k = 0; k < images_.size(); ++k) {
      HT_CHECK(k == 0 || images_[k].id != images_[k - 1].id, path, ": image id ", images_[k].id, " appears twice");
      index_of_[images_[k].id] = k;
    }
  }

  void read_annotations(const json& anns, const std::string& path) {
    for (size_t k = 0; k < anns.size(); ++k) {
      const json& a = anns[k];
      const std::string entry = "annotations[" + std::to_string(k) + "]" +
                                (a.contains("id") ? " (id " + a["id"].dump() + ")" : std::string());
      if (a.contains("iscrowd") && a["iscrowd"].is_number() && a["iscrowd"].get<int>() != 0) continue;
      const int64_t image_id = field<int64_t>(a, "image_id", path, entry);
      const auto img = index_of_.find(image_id);
      HT_CHECK(img != index_of_.end(), path, ": ", entry, ": image_id ", image_id, " is not among the images");
      const int64_t cat = field<int64_t>(a, "category_id", path, entry);
      const auto cls = class_of_.find(cat);
      HT_CHECK(cls != class_of_.end(), path, ": ", entry, ": category_id ", cat, " is not among the categories");
      const auto bbox = field<std::vector<double>>(a, "bbox", path, entry);
      HT_CHECK(bbox.size() == 4, path, ": ", entry, ": bbox must be [x, y, width, height]");
      CocoImage& ci = images_[img->second];
      const double x = bbox[0], y = bbox[1], w = bbox[2], h = bbox[3];
      HT_CHECK(w > 0 && h > 0, path, ": ", entry, ": bbox [", x, ", ", y, ", ", w, ", ", h, "] has zero size");
      HT_CHECK(x >= -kBorderSlack && y >= -kBorderSlack && x + w <= ci.width + kBorderSlack &&
                   y + h <= ci.height + kBorderSlack,
               path, ": ", entry, ": bbox [", x, ", ", y, ", ", w, ", ", h, "] lies outside its ", ci.width, "x",
               ci.height, " image (id ", image_id, ")");
      CocoBox b{std::max(0.0, x), std::max(0.0, y), std::min(double(ci.width), x + w), std::min(double(ci.height), y + h),
                cls->second};
      if (b.x1 > b.x0 && b.y1 > b.y0) ci.boxes.push_back(b);
    }
  }

  int size_;
  int64_t max_pixels_;
  std::vector<CocoImage> images_;
  std::map<int64_t, size_t> index_of_;   // image id → position in images_
  std::map<int64_t, int32_t> class_of_;  // category id → class
};
}  // namespace

std::unique_ptr<SampleSource> open_coco(const std::string& images_dir, const std::string& annotations, int size,
                                        int channels, int64_t max_pixels) {
  return std::make_unique<CocoSource>(images_dir, annotations, size, channels, max_pixels);
}

}  // namespace hetrain::data
