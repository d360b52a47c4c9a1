// hetrain-pack inspect FILE [--verify]: what a dataset holds; --verify reads every shard, label and image
// and recomputes mean/std.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"
#include "tools.hpp"

namespace po = boost::program_options;

namespace hetrain::tools {
namespace {
// Chunk shape and filters of /images in the first shard, e.g. "chunks [83, 1, 28, 28], gzip 4".
// A JPEG dataset: its bytes per image against raw pixels at the batches' shape.
std::string jpeg_storage_of(const data::DatasetInfo& info) {
  using namespace data;
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::quiet();
  double bytes = 0;
  for (const std::string& path : info.shard_files) {
    h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    h5::Id d(f.valid() ? H5Dopen2(f, "jpeg", H5P_DEFAULT) : -1);
    if (!d.valid()) return "JPEG (?)";
    h5::Id space(H5Dget_space(d));
    bytes += double(H5Sget_simple_extent_npoints(space));
  }
  const double per_image = bytes / double(info.num_samples);
  char text[160];
  std::snprintf(text, sizeof text, "JPEG, %.1f KB per image on average; raw %dx%dx%d pixels: %.1f KB (raw/JPEG %.2f)",
                per_image / 1e3, info.channels, info.height, info.width, double(info.sample_bytes()) / 1e3,
                double(info.sample_bytes()) / per_image);
  return text;
}

std::string storage_of(const std::string& path) {
  using namespace data;
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::quiet();
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) return "?";
  h5::Id d(H5Dopen2(f, "images", H5P_DEFAULT));
  if (!d.valid()) return "?";
  h5::Id pl(H5Dget_create_plist(d));
  std::string out;
  if (H5Pget_layout(pl) == H5D_CHUNKED) {
    hsize_t c[4] = {0, 0, 0, 0};
    H5Pget_chunk(pl, 4, c);
    out = "chunks [" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ", " + std::to_string(c[2]) + ", " +
          std::to_string(c[3]) + "]";
  } else {
    out = "contiguous";
  }
  int nf = H5Pget_nfilters(pl);
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, cd[4] = {0, 0, 0, 0};
    size_t ncd = 4;
    char name[64] = {0};
    H5Z_filter_t id = H5Pget_filter2(pl, unsigned(i), &flags, &ncd, cd, sizeof name, name, nullptr);
    if (id == H5Z_FILTER_DEFLATE) out += ", gzip " + std::to_string(cd[0]);
    else if (id != H5Z_FILTER_SHUFFLE) out += std::string(", filter ") + name;
  }
  return out;
}
}  // namespace

int inspect_main(const std::vector<std::string>& args) {
  std::string file;
  std::string task;
  bool verify = false;
  po::options_description d("inspect options");
  d.add_options()("file", po::value(&file)->required(), "dataset file (single file or shard index; positional)")(
      "verify", po::bool_switch(&verify), "read every shard, label and image; recompute mean/std")(
      "task", po::value(&task), "fail unless the dataset is of this kind: classification or detection")(
      "help,h", "this help");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: hetrain-pack inspect FILE [--verify]\nPrints a dataset's format, counts, classes, "
                 "mean/std and shards.\n\n" << d << "\n";
    return 0;
  }
  po::notify(vm);

  HT_CHECK(task.empty() || task == "classification" || task == "detection",
           "--task must be classification or detection, got ", quoted(task));
  auto ds = data::Dataset::open(file);
  const auto& in = ds->info();
  if (task == "detection") data::require_detection(in, "--task detection");
  if (task == "classification") data::require_classification(in, "--task classification");
  std::printf("file         %s\n", file.c_str());
  std::printf("format       %s version %d\n", data::kFormatName, data::kFormatVersion);
  std::printf("samples      %lld\n", (long long)in.num_samples);
  std::printf("shape        [N, C, H, W] = [%lld, %d, %d, %d] uint8%s\n", (long long)in.num_samples, in.channels,
              in.height, in.width, in.jpeg ? " (decoded from JPEG)" : "");
  if (in.jpeg)
    std::printf("storage      %s\n", jpeg_storage_of(in).c_str());
  else
    std::printf("storage      %s\n", storage_of(in.shard_files[0]).c_str());
  std::printf("task         %s\n", in.has_boxes ? "detection" : "classification");
  std::vector<int64_t> hist(in.num_classes, 0);
  if (in.has_boxes) {  // boxes per class (the labels only summarise a detection image)
    const data::BoxList boxes = ds->all_boxes();
    int64_t most = 0;
    for (int64_t i = 0; i < boxes.samples(); ++i) most = std::max(most, boxes.count(i));
    std::printf("boxes        %lld (%.2f per image, at most %lld)\n", (long long)in.num_boxes,
                double(in.num_boxes) / double(in.num_samples), (long long)most);
    for (int64_t r = 0; r < in.num_boxes; ++r) ++hist[int(boxes.box(r)[0])];
    std::printf("classes      %d (boxes per class)\n", in.num_classes);
  } else {
    for (int32_t l : ds->all_labels()) ++hist[l];
    std::printf("classes      %d\n", in.num_classes);
  }
  for (int k = 0; k < in.num_classes; ++k)
    std::printf("  %4d %-24s %lld\n", k, in.class_names[k].c_str(), (long long)hist[k]);
  std::printf("mean        ");
  for (float m : in.mean) std::printf(" %.4f", m);
  std::printf("\nstd         ");
  for (float s : in.std) std::printf(" %.4f", s);
  std::printf("\nsource       %s\ncreated      %s\n", in.source.c_str(), in.created.c_str());
  std::printf("shards       %zu\n", in.shard_files.size());
  if (in.shard_files.size() > 1)
    for (size_t s = 0; s < in.shard_files.size(); ++s)
      std::printf("  %s  %lld\n", in.shard_files[s].c_str(), (long long)in.shard_counts[s]);
  if (!verify) return 0;

  // Every shard opened (labels range-checked on open), every image read, statistics recomputed.
  const int64_t N = in.num_samples, sb = in.sample_bytes(), block = std::max<int64_t>(1, (64 << 20) / sb);
  const int64_t plane = int64_t(in.height) * in.width;
  std::vector<double> sum(in.channels, 0), sq(in.channels, 0);
  std::vector<uint8_t> buf(block * sb);
  for (int64_t b = 0; b < N; b += block) {
    std::vector<int64_t> idx(std::min(block, N - b));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = b + int64_t(i);
    ds->read(idx, buf.data(), nullptr);
    for (size_t i = 0; i < idx.size(); ++i)
      for (int c = 0; c < in.channels; ++c) {
        const uint8_t* p = &buf[i * sb + c * plane];
        uint64_t s = 0, s2 = 0;
        for (int64_t k = 0; k < plane; ++k) { s += p[k]; s2 += uint32_t(p[k]) * p[k]; }
        sum[c] += s / 255.0;
        sq[c] += s2 / (255.0 * 255.0);
      }
  }
  for (int c = 0; c < in.channels; ++c) {
    double m = sum[c] / (double(N) * plane), sd = std::sqrt(std::max(0.0, sq[c] / (double(N) * plane) - m * m));
    HT_CHECK(std::fabs(m - in.mean[c]) < 1e-3 && std::fabs(sd - in.std[c]) < 1e-3, file, ": channel ", c,
             " mean/std recomputed as ", m, "/", sd, " but stored as ", in.mean[c], "/", in.std[c]);
  }
  std::printf("verify       OK: %zu shard(s), %lld labels in [0, %d), ", in.shard_files.size(), (long long)N,
              in.num_classes);
  if (in.has_boxes) std::printf("%lld boxes valid, ", (long long)in.num_boxes);
  std::printf("%lld images %s, mean/std match\n", (long long)N, in.jpeg ? "decoded" : "read");
  return 0;
}

}  // namespace hetrain::tools
