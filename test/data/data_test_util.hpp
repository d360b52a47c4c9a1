// Helpers of the data tests: a scratch folder, and writers of small IDX / CIFAR / PNG / JPEG inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/pack.hpp"

namespace hetrain::data::testing {

// Runs f, expects a hetrain::Error whose message contains every needle, on one line (a GoogleTest failure
// otherwise).
void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles);

// A fresh folder under /tmp, removed with everything in it at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> files() const;  // names of the regular files inside (sorted)

 private:
  std::string path_;
};

// IDX with the given dims; gzip compresses with zlib's gzwrite.
void write_idx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
               bool gzip);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_bytes(const std::string& path);
// Image pixels as interleaved HWC.
void write_png(const std::string& path, int h, int w, int channels, const std::vector<uint8_t>& hwc);
void write_jpeg(const std::string& path, int h, int w, int channels, const std::vector<uint8_t>& hwc, int quality);
// Deterministic pseudo-random bytes.
std::vector<uint8_t> random_bytes(size_t n, uint64_t seed);
// A smooth image (JPEG-friendly): HWC.
std::vector<uint8_t> smooth_image(int h, int w, int channels, int seed);

// A detection source with the given boxes (kBoxFields floats each) per sample: images C×H×W of seeded
// bytes, the label of each its largest box's class.
class BoxSource : public SampleSource {
 public:
  BoxSource(std::vector<std::vector<float>> boxes, int channels, int height, int width, int num_classes);
  int64_t size() const override { return int64_t(boxes_.size()); }
  void get(int64_t i, uint8_t* image, int32_t* label) const override;
  void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const override;

 private:
  std::vector<std::vector<float>> boxes_;
};
// n samples with 0, 1, 2, ... (i mod 4) boxes of seeded positions and classes (< num_classes).
std::vector<std::vector<float>> varied_boxes(int n, int num_classes, uint64_t seed);

}  // namespace hetrain::data::testing
