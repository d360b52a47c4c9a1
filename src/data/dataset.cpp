// Dataset: opening and validating v1 files (single, shard, index) and reading selected samples.
//
// Labels are small (4 bytes a sample), so a shard's labels are read and range-checked when the shard is
// opened and served from memory. Opening an index validates every shard once (then closes it), so bad input
// is found by open() on every rank alike; a shard is opened for reading when a read first touches it.
// Images of uncompressed shards are copied from a memory map of the file (data/mapped_images.hpp, which also
// turns a file shrinking under the map into an error); otherwise they are read with one H5Dread per run of
// consecutive indices. After each read, the files read must still have the size and mtime seen at open.
// Detection datasets: each file's boxes are read and checked with its labels (data/boxes.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "data/boxes.hpp"
#include "data/h5util.hpp"
#include "data/mapped_images.hpp"
#include "data/shard.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

void check_sample_shape(const std::string& what, int64_t channels, int64_t height, int64_t width) {
  HT_CHECK(channels > 0 && height > 0 && width > 0, what, ": image shape ", channels, "x", height, "x", width,
           " is not positive");
  // Each factor is checked before multiplying, so the product cannot overflow.
  const bool fits = channels <= kMaxSampleBytes && height <= kMaxSampleBytes && width <= kMaxSampleBytes &&
                    channels * height <= kMaxSampleBytes && channels * height * width <= kMaxSampleBytes;
  if (fits) return;
  const double bytes = double(channels) * double(height) * double(width);
  char size[32];
  std::snprintf(size, sizeof size, "%.4g", bytes);
  HT_THROW(what, ": a ", channels, "x", height, "x", width, " sample is ", size, " bytes, more than hetrain handles (",
           kMaxSampleBytes, " bytes = C*H*W per sample)");
}

namespace {
bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string dir_of(const std::string& p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "" : p.substr(0, slash + 1);
}

// Opens a file and checks it is a hetrain dataset of a version we read. Caller holds the HDF5 mutex.
h5::Id open_checked(const std::string& path) {
  h5::quiet();
  HT_CHECK(file_exists(path), path, ": no such file");
  htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) {
    H5Eclear2(H5E_DEFAULT);
    HT_THROW(path, ": not an HDF5 file (no HDF5 signature)");
  }
  h5::Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  HT_CHECK(f.valid(), path, ": cannot open HDF5 file (truncated or damaged?): ", h5::last_error());
  HT_CHECK(h5::has_attr(f, "format"), path, ": not a hetrain dataset (root attribute 'format' is missing)");
  std::string fmt = h5::read_string_attr(f, "format", path);
  HT_CHECK(fmt == kFormatName, path, ": format is ", quoted(fmt), ", expected '", kFormatName, "'");
  int64_t version = h5::read_int_attr(f, "version", path);
  HT_CHECK(version == kFormatVersion, path, ": format version ", version, " is not supported (this hetrain reads ",
           kFormatName, " version ", kFormatVersion, ")");
  return f;
}

void read_info(hid_t f, const std::string& path, DatasetInfo& info) {
  info.path = path;
  info.num_samples = h5::read_int_attr(f, "num_samples", path);
  auto shape = h5::read_int_array_attr(f, "shape", path);
  HT_CHECK(shape.size() == 3 && shape[0] > 0 && shape[1] > 0 && shape[2] > 0, path,
           ": attribute 'shape' must be three positive integers [C, H, W]");
  check_sample_shape(path + ": attribute 'shape'", shape[0], shape[1], shape[2]);
  info.channels = int(shape[0]);
  info.height = int(shape[1]);
  info.width = int(shape[2]);
  info.num_classes = int(h5::read_int_attr(f, "num_classes", path));
  HT_CHECK(info.num_classes > 0, path, ": num_classes is ", info.num_classes);
  info.class_names = h5::read_string_array_attr(f, "class_names", path);
  HT_CHECK(int(info.class_names.size()) == info.num_classes, path, ": ", info.class_names.size(),
           " class names for ", info.num_classes, " classes");
  info.mean = h5::read_float_array_attr(f, "mean", path);
  info.std = h5::read_float_array_attr(f, "std", path);
  HT_CHECK(int(info.mean.size()) == info.channels && int(info.std.size()) == info.channels, path,
           ": mean/std must have one value per channel (", info.channels, ")");
  for (float s : info.std) HT_CHECK(s > 0, path, ": std ", s, " is not positive");
  info.source = h5::has_attr(f, "source") ? h5::read_string_attr(f, "source", path) : "";
  info.created = h5::has_attr(f, "created") ? h5::read_string_attr(f, "created", path) : "";
  // Files without the attribute predate detection: classification.
  const std::string task = h5::has_attr(f, "task") ? h5::read_string_attr(f, "task", path) : "classification";
  HT_CHECK(task == "classification" || task == "detection", path, ": attribute 'task' is ", quoted(task),
           ", expected 'classification' or 'detection'");
  info.has_boxes = task == "detection";
  // Files without the attribute predate JPEG storage: raw pixels.
  const std::string storage = h5::has_attr(f, "storage") ? h5::read_string_attr(f, "storage", path) : "raw";
  HT_CHECK(storage == "raw" || storage == "jpeg", path, ": attribute 'storage' is ", quoted(storage),
           ", expected 'raw' or 'jpeg'");
  info.jpeg = storage == "jpeg";
  HT_CHECK(info.num_samples > 0, path, ": empty dataset (num_samples is ", info.num_samples, ")");
}

// Whether a dataset's data pass through filters (compression).
bool filtered(hid_t d) {
  h5::Id dcpl(H5Dget_create_plist(d));
  return dcpl.valid() && H5Pget_nfilters(dcpl) > 0;
}

// HDF5 lets a dataset claim any extent without storing it (unwritten chunks read as fill values), so a
// damaged or hand-made file can claim 2^36 samples in a few kilobytes. Before anything is allocated for the
// count, the file must be large enough to hold it (compressed data: at deflate's best ratio, about 1032:1).
void check_file_holds(const std::string& p, int64_t n, int64_t sample_bytes, bool images_filtered,
                      bool labels_filtered) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return;
  const double kBestRatio = 1100;
  const double need = double(n) * double(sample_bytes) / (images_filtered ? kBestRatio : 1) +
                      double(n) * 4 / (labels_filtered ? kBestRatio : 1);
  HT_CHECK(need <= double(st.st_size), p, ": claims ", n, " samples of ", sample_bytes, " bytes, more than its ",
           st.st_size, " bytes can hold (damaged, or not written by hetrain-pack)");
}

// A raw dataset's /images: uint8 [count, C, H, W].
void open_images(Dataset::Shard& s, const DatasetInfo& info) {
  const std::string& p = s.path;
  HT_CHECK(H5Lexists(s.file, "images", H5P_DEFAULT) > 0, p, ": dataset /images is missing");
  h5::Id dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_chunk_cache(dapl, 521, 8 << 20, 1.0);  // consecutive small samples share a chunk: keep a few
  s.images = h5::Id(H5Dopen2(s.file, "images", dapl));
  HT_CHECK(s.images.valid(), p, ": cannot open /images: ", h5::last_error());
  h5::Id t(H5Dget_type(s.images));
  HT_CHECK(H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1 && H5Tget_sign(t) == H5T_SGN_NONE, p,
           ": /images must be uint8");
  h5::Id sp(H5Dget_space(s.images));
  hsize_t d[4] = {0, 0, 0, 0};
  HT_CHECK(H5Sget_simple_extent_ndims(sp) == 4, p, ": /images must have 4 dimensions [N, C, H, W]");
  H5Sget_simple_extent_dims(sp, d, nullptr);
  HT_CHECK(int64_t(d[1]) == info.channels && int64_t(d[2]) == info.height && int64_t(d[3]) == info.width, p,
           ": /images samples are ", d[1], "x", d[2], "x", d[3], ", expected ", info.channels, "x", info.height,
           "x", info.width);
  HT_CHECK(int64_t(d[0]) == s.count, p, ": /images holds ", d[0], " samples but attribute 'num_samples' says ",
           s.count);
}

// A JPEG dataset's /jpeg (uint8 bytes) and /jpeg_offsets (int64 [count + 1], from 0, never decreasing, ending
// at /jpeg's length), read whole: 8 bytes a sample.
void open_jpeg(Dataset::Shard& s) {
  const std::string& p = s.path;
  HT_CHECK(H5Lexists(s.file, "jpeg", H5P_DEFAULT) > 0 && H5Lexists(s.file, "jpeg_offsets", H5P_DEFAULT) > 0, p,
           ": a JPEG dataset (storage = \"jpeg\") needs /jpeg and /jpeg_offsets");
  s.jpeg = h5::Id(H5Dopen2(s.file, "jpeg", H5P_DEFAULT));
  HT_CHECK(s.jpeg.valid(), p, ": cannot open /jpeg: ", h5::last_error());
  h5::Id t(H5Dget_type(s.jpeg));
  HT_CHECK(H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1 && H5Tget_sign(t) == H5T_SGN_NONE, p,
           ": /jpeg must be uint8");
  h5::Id sp(H5Dget_space(s.jpeg));
  HT_CHECK(H5Sget_simple_extent_ndims(sp) == 1, p, ": /jpeg must have 1 dimension (bytes)");
  const int64_t total = H5Sget_simple_extent_npoints(sp);
  h5::Id od(H5Dopen2(s.file, "jpeg_offsets", H5P_DEFAULT));
  h5::Id osp(H5Dget_space(od));
  HT_CHECK(od.valid() && H5Sget_simple_extent_ndims(osp) == 1 && H5Sget_simple_extent_npoints(osp) == s.count + 1, p,
           ": /jpeg_offsets must hold num_samples + 1 = ", s.count + 1, " values");
  check_file_holds(p, s.count, sizeof(int64_t), filtered(od), false);  // before the offsets are allocated
  s.jpeg_offsets.resize(size_t(s.count) + 1);
  HT_CHECK(H5Dread(od, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.jpeg_offsets.data()) >= 0, p,
           ": cannot read /jpeg_offsets: ", h5::last_error());
  HT_CHECK(s.jpeg_offsets[0] == 0 && s.jpeg_offsets.back() == total, p, ": /jpeg_offsets must run from 0 to /jpeg's ",
           total, " bytes, they run from ", s.jpeg_offsets[0], " to ", s.jpeg_offsets.back());
  for (int64_t i = 0; i < s.count; ++i)
    HT_CHECK(s.jpeg_offsets[size_t(i) + 1] > s.jpeg_offsets[size_t(i)], p, ": sample ", i,
             " has no bytes (/jpeg_offsets must increase)");
}

// Opens /images and /labels of a single or shard file, checks them against the logical dataset. map_images:
// also prepare direct reads of /images (MappedImages); a shard opened only to be validated skips that.
void open_arrays(Dataset::Shard& s, const DatasetInfo& info, bool map_images = true) {
  const std::string& p = s.path;
  HT_CHECK(H5Lexists(s.file, "labels", H5P_DEFAULT) > 0, p, ": dataset /labels is missing");
  if (info.jpeg) open_jpeg(s);
  else open_images(s, info);
  h5::Id labels(H5Dopen2(s.file, "labels", H5P_DEFAULT));
  HT_CHECK(labels.valid(), p, ": cannot open /labels: ", h5::last_error());
  h5::Id lt(H5Dget_type(labels));
  HT_CHECK(H5Tget_class(lt) == H5T_INTEGER, p, ": /labels must be integers");
  h5::Id lsp(H5Dget_space(labels));
  hsize_t ln = 0;
  HT_CHECK(H5Sget_simple_extent_ndims(lsp) == 1, p, ": /labels must have 1 dimension [N]");
  H5Sget_simple_extent_dims(lsp, &ln, nullptr);
  HT_CHECK(int64_t(ln) == s.count, p, ": count mismatch: /images holds ", s.count, " samples but /labels holds ", ln);
  if (!info.jpeg) check_file_holds(p, s.count, info.sample_bytes(), filtered(s.images), filtered(labels));
  s.labels.resize(ln);
  HT_CHECK(H5Dread(labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.labels.data()) >= 0, p,
           ": cannot read /labels: ", h5::last_error());
  if (info.has_boxes)
    s.boxes = read_file_boxes(s.file, p, s.count, info.num_classes);
  else
    HT_CHECK(H5Lexists(s.file, "boxes", H5P_DEFAULT) <= 0, p,
             ": has /boxes but is not marked as a detection dataset (root attribute task = \"detection\")");
  if (map_images && !info.jpeg) s.mapped = MappedImages::open(p, s.file, s.images, s.count, info.sample_bytes());
  if (!s.mapped) s.watch = FileWatch(p, -1);
  for (int64_t i = 0; i < s.count; ++i)
    HT_CHECK(s.labels[i] >= 0 && s.labels[i] < info.num_classes, p, ": label ", s.labels[i], " of sample ", i,
             " is outside [0, ", info.num_classes, ")");
}

// Opens shard s of an index and checks it against the index. Caller holds the HDF5 mutex.
std::unique_ptr<Dataset::Shard> open_shard(const DatasetInfo& info, int s, bool map_images) {
  auto sh = std::make_unique<Dataset::Shard>();
  sh->path = info.shard_files[s];
  sh->count = info.shard_counts[s];
  sh->file = open_checked(sh->path);
  int64_t n = h5::read_int_attr(sh->file, "num_samples", sh->path);
  HT_CHECK(n == sh->count, info.path, ": the index says shard ", s, " (", sh->path, ") holds ", sh->count,
           " samples, the shard says ", n);
  open_arrays(*sh, info, map_images);
  return sh;
}
}  // namespace

void Dataset::set_normalisation(std::vector<float> mean, std::vector<float> std) {
  HT_CHECK(int(mean.size()) == info_.channels && int(std.size()) == info_.channels, info_.path, ": normalisation for ",
           mean.size(), " channels, the images have ", info_.channels);
  info_.mean = std::move(mean);
  info_.std = std::move(std);
}

std::unique_ptr<Dataset> Dataset::open(const std::string& path) {
  std::unique_ptr<Dataset> ds(new Dataset());
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::Id f = open_checked(path);
  read_info(f, path, ds->info_);
  std::string layout = h5::has_attr(f, "layout") ? h5::read_string_attr(f, "layout", path) : "single";
  if (layout == "index") {
    HT_CHECK(H5Lexists(f, "shards", H5P_DEFAULT) > 0, path, ": index file without a /shards group");
    auto files = h5::read_string_dataset(f, "shards/files", path);
    h5::Id counts_d(H5Dopen2(f, "shards/counts", H5P_DEFAULT));
    HT_CHECK(counts_d.valid(), path, ": missing /shards/counts");
    std::vector<int64_t> counts(files.size());
    h5::Id csp(H5Dget_space(counts_d));
    HT_CHECK(H5Sget_simple_extent_npoints(csp) == hssize_t(files.size()), path,
             ": /shards/files and /shards/counts differ in length");
    HT_CHECK(H5Dread(counts_d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts.data()) >= 0, path,
             ": cannot read /shards/counts");
    HT_CHECK(!files.empty(), path, ": index lists no shards (empty dataset)");
    int64_t total = 0;
    for (size_t s = 0; s < files.size(); ++s) {
      std::string sp = files[s].size() && files[s][0] == '/' ? files[s] : dir_of(path) + files[s];
      HT_CHECK(file_exists(sp), path, ": shard ", s, " of ", files.size(), " listed in the index is missing: ",
               clipped(sp));  // the name comes from the file: shown clipped
      HT_CHECK(counts[s] > 0, path, ": shard ", s, " (", clipped(sp), ") has count ", counts[s]);
      ds->info_.shard_files.push_back(sp);
      ds->info_.shard_counts.push_back(counts[s]);
      total += counts[s];
    }
    HT_CHECK(total == ds->info_.num_samples, path, ": shard counts add up to ", total, " but num_samples is ",
             ds->info_.num_samples);
    // Every shard is validated now (its count against the index, its arrays, every label), so that a bad
    // shard is refused while opening — before training allocates anything for the claimed counts, and on
    // every rank alike — rather than by whichever rank first reads from it. The shard is closed again: its
    // images are opened (and mapped) when a read first touches it.
    for (size_t s = 0; s < files.size(); ++s) {
      const auto shard = open_shard(ds->info_, int(s), false);
      if (ds->info_.has_boxes) ds->info_.num_boxes += shard->boxes.offsets.back();
    }
    if (ds->info_.has_boxes && h5::has_attr(f, "num_boxes")) {
      const int64_t claimed = h5::read_int_attr(f, "num_boxes", path);
      HT_CHECK(claimed == ds->info_.num_boxes, path, ": attribute 'num_boxes' says ", claimed,
               " but the shards hold ", ds->info_.num_boxes, " boxes");
    }
  } else {
    HT_CHECK(layout == "single" || layout == "shard", path, ": unknown layout ", quoted(layout));
    ds->info_.shard_files = {path};
    ds->info_.shard_counts = {ds->info_.num_samples};
  }
  ds->shard_begin_.assign(1, 0);
  for (int64_t c : ds->info_.shard_counts) ds->shard_begin_.push_back(ds->shard_begin_.back() + c);
  ds->shards_.resize(ds->info_.shard_counts.size());
  if (layout != "index") {  // the file is open already: validate its arrays now
    auto s = std::make_unique<Shard>();
    s->path = path;
    s->count = ds->info_.num_samples;
    s->file = std::move(f);
    open_arrays(*s, ds->info_);
    if (ds->info_.has_boxes) ds->info_.num_boxes = s->boxes.offsets.back();
    ds->shards_[0] = std::move(s);
  }
  return ds;
}

Dataset::~Dataset() {
  if (cache_win_ != MPI_WIN_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Win_free(&cache_win_);
  }
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  shards_.clear();
}


// Caller holds the HDF5 mutex.
Dataset::Shard& Dataset::shard(int s) {
  if (!shards_[s]) shards_[s] = open_shard(info_, s, true);
  return *shards_[s];
}

int Dataset::shards_opened() const {
  int n = 0;
  for (const auto& s : shards_) n += s != nullptr;
  return n;
}

int Dataset::shard_of(int64_t index) const {
  return int(std::upper_bound(shard_begin_.begin(), shard_begin_.end(), index) - shard_begin_.begin()) - 1;
}

void Dataset::gather_boxes(const std::vector<int64_t>& indices, BoxList& out) const {
  out.rows.clear();
  out.offsets.assign(1, 0);
  for (int64_t i : indices) {
    const int s = shards_.size() == 1 ? 0 : shard_of(i);
    append_sample_boxes(shards_[s]->boxes, i - shard_begin_[s], out.rows, out.offsets);
  }
}

// One read's requests: each distinct sample once (uniq, sorted by index), where it comes from, and where
// each request finds it.
struct Dataset::ReadPlan {
  std::vector<int64_t> uniq;     // the distinct samples, ascending
  std::vector<int64_t> slot;     // per request: its sample's position in uniq
  std::vector<int> shard;        // per uniq sample: its shard
  std::vector<int64_t> mapped;   // per uniq sample: its offset in its shard's file map, or -1: read with HDF5
  std::vector<int32_t> labels;   // per uniq sample
  std::vector<int64_t> staged;   // per uniq sample read with HDF5: its position in staging_ (or `images`)
  bool direct = false;           // the HDF5 reads land in `images` itself (see read_with_hdf5)
};

void Dataset::read(const std::vector<int64_t>& indices, uint8_t* images, int32_t* labels, BoxList* boxes) {
  const int64_t n = int64_t(indices.size()), N = info_.num_samples, sb = info_.sample_bytes();
  for (int64_t i = 0; i < n; ++i)
    HT_CHECK(indices[i] >= 0 && indices[i] < N, info_.path, ": sample index ", indices[i], " outside [0, ", N, ")");
  if (boxes) {
    HT_CHECK(info_.has_boxes, info_.path, ": boxes asked of a classification dataset (no /boxes)");
    *boxes = BoxList();
    boxes->offsets.assign(1, 0);
  }
  if (n == 0) return;
  if (info_.jpeg) {  // decoded here with the evaluation transform; the prefetcher decodes on its own threads
    EncodedImages encoded;
    read_encoded(indices, encoded, labels, boxes);
    decode_batch(encoded, indices, info_, false, 0, images, 1);
    return;
  }
  if (cache_) {  // enable_node_cache opened every shard: their boxes are in memory
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(images + i * sb, cache_ + indices[i] * sb, sb);
      if (labels) labels[i] = cache_labels_[indices[i]];
    }
    if (boxes) gather_boxes(indices, *boxes);
    return;
  }
  // A sample whose shard is memory-mapped is copied straight from the map to every position asking for
  // it; the others are read in runs of consecutive indices (within one shard), one H5Dread per run, into
  // `staging_`, then scattered.
  ReadPlan plan = plan_read(indices);
  // The HDF5 mutex is needed only to open a shard, to look up a chunk address the first time, and to read.
  std::unique_lock<std::mutex> lock(hdf5_mutex(), std::defer_lock);
  const std::vector<size_t> slow = locate(plan, lock);
  // Strictly increasing requests read entirely with HDF5 (compressed sequential scans) go straight to `images`.
  plan.direct =
      slow.size() == size_t(n) && plan.uniq.size() == size_t(n) && std::is_sorted(indices.begin(), indices.end());
  if (!slow.empty()) {
    if (!lock.owns_lock()) lock.lock();
    read_with_hdf5(plan, slow, images);
  }
  if (lock.owns_lock()) lock.unlock();
  copy_out(plan, images, labels);
  // The bytes just copied are only good if the files did not change meanwhile (plan.shard is sorted by
  // sample index, so each shard appears as one run).
  for (size_t u = 0; u < plan.uniq.size(); ++u)
    if (u == 0 || plan.shard[u] != plan.shard[u - 1]) shards_[plan.shard[u]]->check_unchanged();
  // Every shard of `indices` is open by now (boxes come from memory, like labels).
  if (boxes) gather_boxes(indices, *boxes);
}

// Sorts the requests by sample index and lists each distinct sample once, with its shard; a sample of an
// open, memory-mapped shard whose place in the file is known gets its offset and label already.
Dataset::ReadPlan Dataset::plan_read(const std::vector<int64_t>& indices) const {
  const int64_t n = int64_t(indices.size());
  ReadPlan plan;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  plan.slot.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = indices[order[k]];
    if (plan.uniq.empty() || plan.uniq.back() != v) plan.uniq.push_back(v);
    plan.slot[order[k]] = int64_t(plan.uniq.size()) - 1;
  }
  const size_t U = plan.uniq.size();
  plan.shard.resize(U);
  plan.mapped.assign(U, -1);
  plan.labels.resize(U);
  plan.staged.assign(U, -1);
  for (size_t u = 0; u < U; ++u) plan.shard[u] = shards_.size() == 1 ? 0 : shard_of(plan.uniq[u]);
  return plan;
}

// Where each distinct sample comes from and its label, opening shards and resolving map offsets under the
// HDF5 lock only when something is not known yet. Returns the samples to read with HDF5, ascending.
std::vector<size_t> Dataset::locate(ReadPlan& plan, std::unique_lock<std::mutex>& lock) {
  const size_t U = plan.uniq.size();
  bool all_known = true;
  for (size_t u = 0; u < U; ++u) {
    const int s = plan.shard[u];
    const Shard* sh = shards_[s].get();
    if (!sh) {
      all_known = false;
      continue;
    }
    const int64_t local = plan.uniq[u] - shard_begin_[s];
    plan.labels[u] = sh->labels[local];
    if (sh->mapped && sh->mapped->resolved(local)) plan.mapped[u] = sh->mapped->offset(local);
    else if (!sh->mapped) continue;
    else all_known = false;
  }
  if (!all_known) {
    lock.lock();
    for (size_t u = 0; u < U; ++u) {
      if (plan.mapped[u] >= 0) continue;
      Shard& sh = shard(plan.shard[u]);
      const int64_t local = plan.uniq[u] - shard_begin_[plan.shard[u]];
      plan.labels[u] = sh.labels[local];
      if (sh.mapped && sh.mapped->resolve(local)) plan.mapped[u] = sh.mapped->offset(local);
    }
  }
  std::vector<size_t> slow;
  for (size_t u = 0; u < U; ++u) {
    if (plan.mapped[u] < 0) slow.push_back(u);
    // Diagnostics count one read per run of consecutive samples of one shard, as H5Dread would need.
    else if (u == 0 || plan.uniq[u] != plan.uniq[u - 1] + 1 || plan.shard[u] != plan.shard[u - 1] ||
             plan.mapped[u - 1] < 0)
      ++read_calls_;
  }
  return slow;
}

// The HDF5 lock held: the `slow` samples, one H5Dread per run of consecutive indices within a shard, into
// `images` (plan.direct) or staging_.
void Dataset::read_with_hdf5(ReadPlan& plan, const std::vector<size_t>& slow, uint8_t* images) {
  const int64_t sb = info_.sample_bytes();
  if (!plan.direct && staging_.size() < slow.size() * sb) staging_.resize(slow.size() * sb);
  uint8_t* dst = plan.direct ? images : staging_.data();
  size_t k = 0;
  while (k < slow.size()) {
    const int s = plan.shard[slow[k]];
    Shard& sh = shard(s);
    size_t e = k + 1;
    while (e < slow.size() && slow[e] == slow[e - 1] + 1 && plan.uniq[slow[e]] == plan.uniq[slow[e - 1]] + 1 &&
           plan.shard[slow[e]] == s)
      ++e;
    hsize_t start[4] = {hsize_t(plan.uniq[slow[k]] - shard_begin_[s]), 0, 0, 0};
    hsize_t count[4] = {hsize_t(e - k), hsize_t(info_.channels), hsize_t(info_.height), hsize_t(info_.width)};
    h5::Id fspace(H5Dget_space(sh.images));
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
    h5::Id mspace(H5Screate_simple(4, count, nullptr));
    if (H5Dread(sh.images, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, dst + k * sb) < 0) {
      const std::string why = h5::last_error();
      sh.check_unchanged();  // a file changed under us says so rather than HDF5's symptom
      HT_THROW(sh.path, ": cannot read samples ", start[0], "..", start[0] + count[0] - 1, ": ", why);
    }
    ++read_calls_;
    for (size_t j = k; j < e; ++j) plan.staged[slow[j]] = int64_t(j);
    k = e;
  }
}

// Every request's bytes and label into place: from the file maps (back-to-back requests in one copy) and
// from staging_.
void Dataset::copy_out(const ReadPlan& plan, uint8_t* images, int32_t* labels) {
  const int64_t n = int64_t(plan.slot.size()), sb = info_.sample_bytes();
  const auto& slot = plan.slot;
  // One SIGBUS guard for all copies (a file that shrank under its map faults; see MappedImages). The loop
  // holds no objects with destructors, as the guard requires; `at` says where a fault happened.
  volatile int64_t at = 0, at_count = 0;
  const bool copied = MappedImages::guard([&] {
    for (int64_t i = 0; i < n;) {
      const size_t u = size_t(slot[i]);
      int64_t e = i + 1;
      if (plan.mapped[u] >= 0) {
        // Requests that continue back to back in the same file (sequential scans) take one copy.
        while (e < n && plan.shard[slot[e]] == plan.shard[u] &&
               plan.mapped[slot[e]] == plan.mapped[u] + (e - i) * sb)
          ++e;
        at = i;
        at_count = e - i;
        shards_[plan.shard[u]]->mapped->copy_in_guard(plan.mapped[u], e - i, images + i * sb);
      } else if (!plan.direct) {
        std::memcpy(images + i * sb, staging_.data() + plan.staged[u] * sb, sb);
      }
      for (int64_t j = i; labels && j < e; ++j) labels[j] = plan.labels[slot[j]];
      i = e;
    }
  });
  if (!copied) {
    const size_t u = size_t(slot[at]);
    shards_[plan.shard[u]]->mapped->throw_past_end(plan.mapped[u], at_count);
  }
}

void Dataset::enable_node_cache(MPI_Comm node_comm) {
  HT_CHECK(cache_ == nullptr, info_.path, ": node cache already enabled");
  // Refused on every rank alike (the storage is in the file), before anything collective.
  HT_CHECK(!info_.jpeg, info_.path, ": --cache holds raw pixels, and this dataset stores JPEG (decoded as it is "
           "read): drop --cache, or pack it with --store raw");
  int rank = 0, size = 1;
  HT_MPI_CHECK(MPI_Comm_rank(node_comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(node_comm, &size));
  const int64_t N = info_.num_samples, sb = info_.sample_bytes();
  // One copy per node, owned by node rank 0; the others map it.
  MPI_Aint bytes = rank == 0 ? MPI_Aint(N * sb) : 0;
  void* base = nullptr;
  HT_MPI_CHECK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node_comm, &base, &cache_win_));
  MPI_Aint got = 0;
  int disp = 1;
  void* mem = nullptr;
  HT_MPI_CHECK(MPI_Win_shared_query(cache_win_, 0, &got, &disp, &mem));
  uint8_t* shared = static_cast<uint8_t*>(mem);
  // Each node rank fills a contiguous slice with sorted, consecutive reads, and loads every label (each
  // rank keeps its own copy, 4 bytes a sample). A failure on one rank is agreed on before anyone goes on:
  // every node rank then frees the window and throws, so none waits in a collective for a rank that left.
  HT_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, cache_win_));
  const int64_t begin = N * rank / size, end = N * (rank + 1) / size, block = 4096;
  std::string error;
  try {
    for (int64_t b = begin; b < end; b += block) {
      std::vector<int64_t> idx(std::min(block, end - b));
      std::iota(idx.begin(), idx.end(), b);
      read(idx, shared + b * sb, nullptr);
    }
    cache_labels_.resize(N);
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    for (size_t s = 0; s < shards_.size(); ++s) {
      Shard& sh = shard(int(s));
      std::copy(sh.labels.begin(), sh.labels.end(), cache_labels_.begin() + shard_begin_[s]);
    }
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  HT_MPI_CHECK(MPI_Win_sync(cache_win_));
  const int failed = error.empty() ? 0 : 1;
  int any_failed = 0;  // the allreduce is also the barrier between filling and reading the window
  HT_MPI_CHECK(MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, node_comm));
  HT_MPI_CHECK(MPI_Win_sync(cache_win_));
  HT_MPI_CHECK(MPI_Win_unlock_all(cache_win_));
  if (any_failed) {
    HT_MPI_CHECK(MPI_Win_free(&cache_win_));  // collective: every node rank is here
    cache_win_ = MPI_WIN_NULL;
    cache_labels_.clear();
    if (failed) HT_THROW(error);
    HT_THROW(info_.path, ": node cache not enabled: another rank of this node failed to load its share");
  }
  // Map every page of the window into this process now: the pages other ranks filled are not yet in this
  // rank's page table, and faulting them in one by one during the first epoch's random reads made the
  // 4-rank cache slower than reading the file. One read per page maps the existing page (no copy).
  {
    const long page = std::max(4096L, ::sysconf(_SC_PAGESIZE));
    unsigned sum = 0;
    for (int64_t off = 0; off < N * sb; off += page) sum += static_cast<const volatile uint8_t*>(shared)[off];
    asm volatile("" : : "r"(sum));
  }
  cache_ = shared;
}

}  // namespace hetrain::data

namespace hetrain::data {
std::vector<int32_t> Dataset::all_labels() {
  std::vector<int32_t> out(info_.num_samples);
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& sh = shard(int(s));
    std::copy(sh.labels.begin(), sh.labels.end(), out.begin() + shard_begin_[s]);
  }
  return out;
}

BoxList Dataset::all_boxes() {
  HT_CHECK(info_.has_boxes, info_.path, ": boxes asked of a classification dataset (no /boxes)");
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  for (size_t s = 0; s < shards_.size(); ++s) shard(int(s));
  std::vector<int64_t> all(size_t(info_.num_samples));
  std::iota(all.begin(), all.end(), 0);
  BoxList out;
  gather_boxes(all, out);
  return out;
}
ImageOrigins read_image_origins(const DatasetInfo& info) {
  ImageOrigins o;
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  {
    h5::Id f = open_checked(info.path);
    if (h5::has_attr(f, "category_ids")) o.category_ids = h5::read_int_array_attr(f, "category_ids", info.path);
  }
  for (size_t s = 0; s < info.shard_files.size(); ++s) {
    const std::string& path = info.shard_files[s];
    h5::Id f = open_checked(path);
    const bool has = H5Lexists(f, "image_ids", H5P_DEFAULT) > 0 && H5Lexists(f, "source_sizes", H5P_DEFAULT) > 0;
    if (s == 0) o.present = has;
    HT_CHECK(has == o.present, path, ": /image_ids and /source_sizes are in some shards of the set and not in others");
    if (!has) continue;
    const int64_t n = info.shard_counts.empty() ? info.num_samples : info.shard_counts[s];
    h5::Id ids(H5Dopen2(f, "image_ids", H5P_DEFAULT)), sizes(H5Dopen2(f, "source_sizes", H5P_DEFAULT));
    h5::Id ids_space(H5Dget_space(ids)), sizes_space(H5Dget_space(sizes));
    HT_CHECK(H5Sget_simple_extent_npoints(ids_space) == n && H5Sget_simple_extent_npoints(sizes_space) == 2 * n, path,
             ": /image_ids and /source_sizes must hold ", n, " and ", n, "x2 values");
    const size_t at = o.image_ids.size();
    o.image_ids.resize(at + size_t(n));
    o.sizes.resize(2 * (at + size_t(n)));
    HT_CHECK(n == 0 || (H5Dread(ids, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.image_ids.data() + at) >= 0 &&
                        H5Dread(sizes, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, o.sizes.data() + 2 * at) >= 0),
             path, ": cannot read /image_ids or /source_sizes: ", h5::last_error());
  }
  return o;
}

}  // namespace hetrain::data
