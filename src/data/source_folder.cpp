// ImageFolder: root/<class>/<file>. Classes = sorted sub-folders, files sorted within each class, so the
// sample order (and each rank's shards) is the same on every rank without communication.
#include <algorithm>
#include <filesystem>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace fs = std::filesystem;

namespace hetrain::data {
namespace {
bool is_image(const fs::path& p) {
  std::string e = p.extension().string();
  for (auto& ch : e) ch = char(std::tolower(ch));
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

class FolderSource : public SampleSource {
 public:
  FolderSource(const std::string& root, int size, int channels) : size_(size) {
    HT_CHECK(size > 0, "--size must be positive, got ", size);
    HT_CHECK(channels == 1 || channels == 3, "--channels must be 1 or 3, got ", channels);
    check_sample_shape("--size " + std::to_string(size), channels, size, size);
    std::error_code ec;
    HT_CHECK(fs::is_directory(root, ec), root, ": not a folder (expected one sub-folder per class)");
    std::vector<std::string> classes;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory()) classes.push_back(e.path().filename().string());
    std::sort(classes.begin(), classes.end());
    HT_CHECK(!classes.empty(), root, ": no class sub-folders");
    for (size_t k = 0; k < classes.size(); ++k) {
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(fs::path(root) / classes[k], ec))
        if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      for (auto& f : files) {
        files_.push_back(f);
        labels_.push_back(int32_t(k));
      }
    }
    HT_CHECK(!files_.empty(), root, ": no .jpg/.jpeg/.png files in the class sub-folders (empty dataset)");
    meta.channels = channels;
    meta.height = meta.width = size;
    meta.num_classes = int(classes.size());
    meta.class_names = classes;
    meta.source = "folder: " + root + " (shorter side resized to " + std::to_string(size) + ", centre crop)";
  }
  int64_t size() const override { return int64_t(files_.size()); }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    Image img = decode_image(files_[i], meta.channels);
    resize_center_crop(img, size_, image);
    *label = labels_[i];
  }
  const std::string& file(int64_t i) const { return files_[i]; }

 private:
  int size_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
};
}  // namespace

std::unique_ptr<SampleSource> open_folder(const std::string& root, int size, int channels) {
  return std::make_unique<FolderSource>(root, size, channels);
}

}  // namespace hetrain::data
