// ImageFolder: root/<class>/<file>. Classes = sorted sub-folders, files sorted within each class, so the
// sample order (and each rank's shards) is the same on every rank without communication. With JPEG storage
// each image is kept whole as a JPEG file at its stored size (docs/dataset-format.md, "JPEG storage").
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
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
  FolderSource(const std::string& root, int size, int channels, const FolderStorage& storage, int64_t max_pixels)
      : size_(size), storage_(storage), max_pixels_(max_pixels) {
    HT_CHECK(max_pixels >= 0, "--max-pixels must be 0 (no limit) or positive, got ", max_pixels);
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
    if (storage.jpeg) {
      HT_CHECK(storage.quality >= 1 && storage.quality <= 100, "--quality must be 1..100, got ", storage.quality);
      if (storage_.stored_size == 0) storage_.stored_size = int(std::lround(size * 256.0 / 224.0));
      HT_CHECK(storage_.stored_size >= size, "--stored-size ", storage_.stored_size, " is smaller than --size ", size,
               ": the stored images must cover the batches' size");
      meta.jpeg = true;
      meta.source = "folder: " + root + " (JPEG, shorter side at most " + std::to_string(storage_.stored_size) +
                    ", quality " + std::to_string(storage.quality) + "; decoded to " + std::to_string(size) + "x" +
                    std::to_string(size) + ")";
    }
  }
  int64_t size() const override { return int64_t(files_.size()); }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    Image img = decode_image(files_[i], meta.channels, max_pixels_);
    resize_center_crop(img, size_, image);
    *label = labels_[i];
  }
  void get_encoded(int64_t i, std::vector<uint8_t>& jpeg, uint8_t* image, int32_t* label) const override {
    const std::string& path = files_[size_t(i)];
    std::vector<uint8_t> file = read_whole_file(path);
    // JPEG or PNG by the first bytes, whatever the name says; too many pixels are refused before decoding.
    const ImageInfo info = read_image_info(file, path);
    check_pixels(info, max_pixels_, path);
    Image img;
    bool kept = false;
    if (info.kind == ImageInfo::kJpeg) {
      const JpegHeader hdr = read_jpeg_header(file.data(), file.size(), shown_name(path));
      const bool colours_fit = meta.channels == 3 ? hdr.colorspace == TJCS_YCbCr : hdr.colorspace == TJCS_GRAY;
      kept = colours_fit && std::min(hdr.width, hdr.height) <= storage_.stored_size;
      if (kept) jpeg = std::move(file);
      else img = decode_jpeg_bytes(file.data(), file.size(), meta.channels, shown_name(path));
    } else {
      img = decode_png_bytes(file, meta.channels, path);
    }
    if (!kept) {
      const int shorter = std::min(img.width, img.height);
      if (shorter > storage_.stored_size) {
        const double s = double(storage_.stored_size) / shorter;
        img = resize_bilinear(img, std::max(1, int(std::lround(img.height * s))),
                              std::max(1, int(std::lround(img.width * s))));
      }
      jpeg = encode_jpeg(img, storage_.quality);
    }
    // The statistics come from the stored bytes, decoded as the reader decodes them for evaluation.
    decode_sample(jpeg.data(), jpeg.size(), meta.channels, size_, size_, false, 0, i, shown_name(path), image);
    *label = labels_[size_t(i)];
  }
  const std::string& file(int64_t i) const { return files_[i]; }

 private:
  int size_;
  FolderStorage storage_;
  int64_t max_pixels_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
};
}  // namespace

std::unique_ptr<SampleSource> open_folder(const std::string& root, int size, int channels,
                                          const FolderStorage& storage, int64_t max_pixels) {
  return std::make_unique<FolderSource>(root, size, channels, storage, max_pixels);
}

}  // namespace hetrain::data
