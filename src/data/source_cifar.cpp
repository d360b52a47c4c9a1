// CIFAR-10/100 binary batches: fixed-size records, pixels already CHW (1024 R, 1024 G, 1024 B).
#include <cstdio>
#include <cstring>

#include "data/pack.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
constexpr int kPixels = 3 * 32 * 32;

class CifarSource : public SampleSource {
 public:
  CifarSource(const std::vector<std::string>& files, int variant, bool fine, const std::vector<std::string>& names) {
    HT_CHECK(variant == 10 || variant == 100, "CIFAR variant must be 10 or 100, got ", variant);
    HT_CHECK(!files.empty(), "no CIFAR batch files given");
    label_bytes_ = variant == 10 ? 1 : 2;
    const int record = label_bytes_ + kPixels;
    const int k = variant == 10 ? 10 : (fine ? 100 : 20);
    for (const auto& path : files) {
      std::FILE* f = std::fopen(path.c_str(), "rb");
      HT_CHECK(f, path, ": cannot open: ", std::strerror(errno));
      std::vector<uint8_t> buf;
      uint8_t tmp[1 << 16];
      size_t got;
      while ((got = std::fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + got);
      std::fclose(f);
      HT_CHECK(!buf.empty(), path, ": empty CIFAR batch file");
      if (buf.size() % record != 0)
        HT_THROW(path, ": truncated CIFAR-", variant, " batch: ", buf.size(), " bytes is not a multiple of the ",
                 record, "-byte record; record ", buf.size() / record, " at offset ",
                 buf.size() / record * record, " is incomplete");
      for (size_t r = 0; r < buf.size() / record; ++r) {
        const uint8_t* rec = &buf[r * record];
        int label = variant == 10 ? rec[0] : (fine ? rec[1] : rec[0]);
        HT_CHECK(label < k, path, ": record ", r, " (offset ", r * record, "): label ", label, " outside [0, ", k,
                 ")");
        labels_.push_back(label);
        pixels_.insert(pixels_.end(), rec + label_bytes_, rec + record);
      }
    }
    HT_CHECK(names.empty() || int(names.size()) == k, "got ", names.size(), " class names for ", k, " classes");
    meta.channels = 3;
    meta.height = meta.width = 32;
    meta.num_classes = k;
    meta.class_names = names;
    meta.source = "cifar" + std::to_string(variant) + (variant == 100 ? (fine ? " (fine)" : " (coarse)") : "") + ":";
    for (const auto& p : files) meta.source += " " + p;
  }
  int64_t size() const override { return int64_t(labels_.size()); }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    std::memcpy(image, &pixels_[size_t(i) * kPixels], kPixels);
    *label = labels_[i];
  }

 private:
  int label_bytes_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};
}  // namespace

std::unique_ptr<SampleSource> open_cifar(const std::vector<std::string>& files, int variant, bool fine,
                                         const std::vector<std::string>& class_names) {
  return std::make_unique<CifarSource>(files, variant, fine, class_names);
}

}  // namespace hetrain::data
