// IDX (the MNIST file format): big-endian header <0 0 type ndim> <dims...>, then the data. Plain or gzip;
// zlib's gzread reads both. The whole file is loaded: MNIST-sized inputs are tens of MB.
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "data/pack.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  HT_CHECK(f, path, ": cannot open: ", std::strerror(errno ? errno : ENOENT));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      HT_THROW(path, ": corrupt gzip data after ", out.size(), " decompressed bytes: ", why);
    }
    if (got == 0) break;
    out.insert(out.end(), buf, buf + got);
  }
  int code = 0;
  const char* why = gzerror(f, &code);
  std::string msg = why ? why : "";
  gzclose(f);
  // A truncated gzip stream ends with Z_BUF_ERROR ("unexpected end of file") rather than a read error.
  HT_CHECK(code == Z_OK || code == Z_STREAM_END, path, ": corrupt or truncated gzip data after ", out.size(),
           " decompressed bytes: ", msg);
  return out;
}

uint32_t be32(const uint8_t* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

struct Idx {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> bytes;  // whole file; data starts at `offset`
  size_t offset = 0;
};

Idx parse_idx(const std::string& path, int want_ndim) {
  Idx idx;
  idx.bytes = read_maybe_gzip(path);
  const auto& b = idx.bytes;
  HT_CHECK(b.size() >= 4, path, ": truncated IDX header (", b.size(), " bytes)");
  HT_CHECK(b[0] == 0 && b[1] == 0, path, ": not an IDX file (magic bytes at offset 0 are not 00 00)");
  HT_CHECK(b[2] == 0x08, path, ": IDX element type 0x", std::hex, int(b[2]), std::dec,
           " at offset 2 is not unsigned byte (0x08)");
  HT_CHECK(b[3] == want_ndim, path, ": IDX file has ", int(b[3]), " dimensions at offset 3, expected ", want_ndim);
  idx.offset = 4 + 4 * size_t(want_ndim);
  HT_CHECK(b.size() >= idx.offset, path, ": truncated IDX header (", b.size(), " bytes, need ", idx.offset, ")");
  size_t total = 1;
  for (int d = 0; d < want_ndim; ++d) {
    idx.dims.push_back(be32(&b[4 + 4 * d]));
    total *= idx.dims.back();
  }
  size_t have = b.size() - idx.offset;
  if (have < total) {
    size_t n_whole = idx.dims[0] ? have / (total / std::max<size_t>(1, idx.dims[0])) : 0;
    HT_THROW(path, ": truncated IDX data: header announces ", total, " data bytes, file ends at offset ", b.size(),
             " (entry ", n_whole, " of ", idx.dims[0], " is incomplete)");
  }
  HT_CHECK(have == total, path, ": ", have - total, " unexpected bytes after the IDX data at offset ",
           idx.offset + total);
  return idx;
}

class IdxSource : public SampleSource {
 public:
  IdxSource(const std::string& images, const std::string& labels, int num_classes,
            const std::vector<std::string>& names)
      : img_(parse_idx(images, 3)), lab_(parse_idx(labels, 1)) {
    HT_CHECK(img_.dims[0] == lab_.dims[0], images, " holds ", img_.dims[0], " images but ", labels, " holds ",
             lab_.dims[0], " labels");
    HT_CHECK(img_.dims[0] > 0, images, ": empty dataset (0 images)");
    n_ = img_.dims[0];
    int max_label = 0;
    for (int64_t i = 0; i < n_; ++i) max_label = std::max<int>(max_label, lab_.bytes[lab_.offset + i]);
    int k = num_classes > 0 ? num_classes : std::max<int>(max_label + 1, names.empty() ? 10 : int(names.size()));
    for (int64_t i = 0; i < n_; ++i) {
      int l = lab_.bytes[lab_.offset + i];
      HT_CHECK(l < k, labels, ": entry ", i, " (offset ", lab_.offset + i, "): label ", l, " outside [0, ", k, ")");
    }
    HT_CHECK(names.empty() || int(names.size()) == k, "got ", names.size(), " class names for ", k, " classes");
    meta.channels = 1;
    meta.height = int(img_.dims[1]);
    meta.width = int(img_.dims[2]);
    meta.num_classes = k;
    meta.class_names = names;
    meta.source = "idx: " + images + " + " + labels;
  }
  int64_t size() const override { return n_; }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    size_t sb = size_t(meta.height) * meta.width;
    std::memcpy(image, &img_.bytes[img_.offset + i * sb], sb);
    *label = lab_.bytes[lab_.offset + i];
  }

 private:
  Idx img_, lab_;
  int64_t n_;
};
}  // namespace

std::unique_ptr<SampleSource> open_idx(const std::string& images, const std::string& labels, int num_classes,
                                       const std::vector<std::string>& class_names) {
  return std::make_unique<IdxSource>(images, labels, num_classes, class_names);
}

}  // namespace hetrain::data
