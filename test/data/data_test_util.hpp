// Helpers of the data tests: a scratch folder, and writers of small IDX / CIFAR / PNG / JPEG inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::data::testing {

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

}  // namespace hetrain::data::testing
