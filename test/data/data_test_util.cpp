#include "data_test_util.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "data/rng.hpp"
#include "hetrain/error.hpp"

namespace fs = std::filesystem;

namespace hetrain::data::testing {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const hetrain::Error& e) {
    for (const auto& n : needles) EXPECT_NE(e.message().find(n), std::string::npos) << e.message() << " lacks " << n;
    EXPECT_EQ(e.message().find('\n'), std::string::npos) << e.message();
    return;
  }
  ADD_FAILURE() << "no error thrown";
}

// pack() and the node cache use MPI (on MPI_COMM_SELF here): start it once for this gtest_main binary.
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) MPI_Init(nullptr, nullptr);
  }
  void TearDown() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
  }
};
static ::testing::Environment* const g_mpi_env = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

TempDir::TempDir() {
  char tmpl[] = "/tmp/hetrain-data-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}
std::vector<std::string> TempDir::files() const {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(path_))
    if (e.is_regular_file()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot read " + path);
  std::vector<uint8_t> out;
  int c;
  while ((c = std::fgetc(f)) != EOF) out.push_back(uint8_t(c));
  std::fclose(f);
  return out;
}

void write_idx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
               bool gzip) {
  std::vector<uint8_t> bytes = {0, 0, 0x08, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(uint8_t(d >> s));
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (!gzip) return write_bytes(path, bytes);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

void write_png(const std::string& path, int h, int w, int channels, const std::vector<uint8_t>& hwc) {
  png_image pi;
  std::memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  pi.width = w;
  pi.height = h;
  pi.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  if (!png_image_write_to_file(&pi, path.c_str(), 0, hwc.data(), 0, nullptr))
    throw std::runtime_error("png write failed: " + std::string(pi.message));
}

void write_jpeg(const std::string& path, int h, int w, int channels, const std::vector<uint8_t>& hwc, int quality) {
  tjhandle t = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(t, hwc.data(), w, 0, h, channels == 3 ? TJPF_RGB : TJPF_GRAY, &buf, &size,
                       channels == 3 ? TJSAMP_444 : TJSAMP_GRAY, quality, 0);
  if (rc != 0) throw std::runtime_error("jpeg compress failed");
  write_bytes(path, std::vector<uint8_t>(buf, buf + size));
  tjFree(buf);
  tjDestroy(t);
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = uint8_t(rng.next() >> 56);
  return out;
}

std::vector<uint8_t> smooth_image(int h, int w, int channels, int seed) {
  std::vector<uint8_t> out(size_t(h) * w * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        out[(size_t(y) * w + x) * channels + c] =
            uint8_t(128 + 100 * std::sin(0.15 * (x + 2 * c + seed) + 0.1 * y * (c + 1 + seed % 3)));
  return out;
}

BoxSource::BoxSource(std::vector<std::vector<float>> boxes, int channels, int height, int width, int num_classes)
    : boxes_(std::move(boxes)) {
  meta.channels = channels;
  meta.height = height;
  meta.width = width;
  meta.num_classes = num_classes;
  meta.has_boxes = true;
  meta.source = "test boxes";
}

void BoxSource::get(int64_t i, uint8_t* image, int32_t* label) const {
  std::vector<float> unused;
  get_boxed(i, image, label, unused);
}

void BoxSource::get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const {
  const auto px = random_bytes(size_t(meta.channels) * meta.height * meta.width, uint64_t(i) + 7);
  std::copy(px.begin(), px.end(), image);
  boxes = boxes_[size_t(i)];
  *label = label_of_boxes(boxes);
}

std::vector<std::vector<float>> varied_boxes(int n, int num_classes, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < i % 4; ++k) {
      const float w = float(0.05 + 0.4 * rng.uniform()), h = float(0.05 + 0.4 * rng.uniform());
      const float cx = float(w / 2 + (1 - w) * rng.uniform()), cy = float(h / 2 + (1 - h) * rng.uniform());
      out[size_t(i)].insert(out[size_t(i)].end(), {float(rng.below(uint64_t(num_classes))), cx, cy, w, h});
    }
  return out;
}

}  // namespace hetrain::data::testing
