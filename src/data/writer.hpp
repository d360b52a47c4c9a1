// data/writer.hpp — writes one dataset file of format v1 (a single file or one shard of a set).
//
// The file is created as "<path>.tmp-<pid>" and only renamed to <path> by commit(), after its attributes
// are written; a writer destroyed without commit() deletes its temp file. So an interrupted or failed pack
// never leaves a file under the final name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"

namespace hetrain::data {

struct WriteOptions {
  int64_t chunk_samples = 0;  // samples per chunk along N; 0 = auto (about 64 KiB per chunk, at least 1)
  int gzip_level = 0;         // 0 = no compression, 1..9 = deflate level
};

// What every file of one logical dataset shares.
struct DatasetMeta {
  int channels = 0, height = 0, width = 0, num_classes = 0;
  std::vector<std::string> class_names;
  std::string source;  // free text: converter and input files
  bool has_boxes = false;  // a detection dataset: /boxes and /box_offsets, task = "detection"
  // Each image's origin (/image_ids, /source_sizes; hetrain-pack coco): what hetrain eval --save-json maps
  // its detections back to. category_ids (an attribute when given): the source's id of each class.
  bool has_origins = false;
  std::vector<int64_t> category_ids;
  // JPEG storage (storage = "jpeg"): /jpeg and /jpeg_offsets instead of /images; channels, height and width
  // are the shape batches are decoded to.
  bool jpeg = false;
};

// Where a packed image came from: its id and its size before letterboxing (docs/dataset-format.md).
struct SampleOrigin {
  int64_t image_id = 0;
  int32_t width = 0, height = 0;
};

// Temporary files and signals: every temporary a FileWriter or write_index creates is recorded (in static
// storage) until it is renamed or removed. After remove_temporaries_on_signals(), SIGINT, SIGTERM and SIGHUP
// unlink the recorded files and then end the process by the same signal (default disposition, so the exit
// status still says which signal); a signal ignored when it is called stays ignored. Nothing can run on SIGKILL: those temporaries stay until a later pack to
// the same output removes them (remove_stale_temporaries in data/pack.hpp).
void remove_temporaries_on_signals();

std::string iso_time_now();  // "2025-01-31T12:00:00Z"
std::string temp_name_for(const std::string& path);  // "<path>.tmp-<pid>"
int64_t auto_chunk_samples(int64_t sample_bytes);

class FileWriter {
 public:
  // n: samples the file will hold (all appended before finish()).
  FileWriter(const std::string& path, int64_t n, const DatasetMeta& meta, const WriteOptions& opt);
  ~FileWriter();  // deletes the temp file unless committed
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // images [count, C, H, W], labels [count]; labels must lie in [0, num_classes). Detection datasets
  // (meta.has_boxes) also take the boxes of these `count` samples, each checked by box_problem().
  // Datasets with origins (meta.has_origins) also take each sample's SampleOrigin.
  void append(const uint8_t* images, const int32_t* labels, int64_t count, const BoxList* boxes = nullptr,
              const SampleOrigin* origins = nullptr);
  // JPEG datasets (meta.jpeg): the `count` samples' JPEG files `encoded` instead of pixels; `images` are the
  // same samples decoded as the reader decodes them for evaluation (C × H × W each), for the statistics.
  void append_encoded(const EncodedImages& encoded, const uint8_t* images, const int32_t* labels, int64_t count);
  int64_t written() const { return written_; }
  int64_t encoded_bytes() const { return jpeg_offsets_.back(); }
  int64_t boxes_written() const { return box_offsets_.back(); }
  // Per-channel Σx and Σx² on the [0,1] scale over everything appended, and the class histogram.
  const std::vector<double>& sum() const { return sum_; }
  const std::vector<double>& sumsq() const { return sumsq_; }
  const std::vector<int64_t>& histogram() const { return hist_; }

  // Writes the root attributes (layout "single" or "shard"), closes the file. shard_index < 0: single file.
  void finish(const std::vector<float>& mean, const std::vector<float>& std, int shard_index = -1,
              int shard_count = 0);
  void commit();  // rename the temp file to the final path
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  DatasetMeta meta_;
  int64_t n_, written_ = 0;
  h5::Id file_, images_, labels_, boxes_, jpeg_;
  std::vector<int64_t> box_offsets_{0};  // [written + 1]; /box_offsets is written by finish()
  std::vector<int64_t> jpeg_offsets_{0};  // [written + 1]; /jpeg_offsets is written by finish()
  std::vector<SampleOrigin> origins_;    // /image_ids and /source_sizes, written by finish()
  std::vector<double> sum_, sumsq_;
  std::vector<int64_t> hist_;
  bool finished_ = false, committed_ = false;
  int temp_slot_ = -1;  // registration of tmp_ for removal on a signal
  void create_boxes(const WriteOptions& opt);
  void create_jpeg();
  // Checks the labels and adds the samples to the class histogram and pixel statistics.
  void account(const uint8_t* images, const int32_t* labels, int64_t count);
  void write_labels(const int32_t* labels, int64_t count);  // caller holds the HDF5 mutex
  void append_boxes(const BoxList& boxes, int64_t count);  // caller holds the HDF5 mutex
};

// Writes the root attributes every v1 file carries (format, version, classes, mean/std, shape, ...).
// Detection datasets (meta.has_boxes) also get task = "detection" and num_boxes.
void write_common_attrs(hid_t file, const DatasetMeta& meta, int64_t num_samples, const std::vector<float>& mean,
                        const std::vector<float>& std, const std::string& layout, int64_t num_boxes = 0);

// The index of a shard set: written to a temp name and renamed. shard_files are stored relative to the
// index file's folder. num_boxes: the boxes of all shards (detection datasets).
void write_index(const std::string& path, const DatasetMeta& meta, const std::vector<std::string>& shard_files,
                 const std::vector<int64_t>& shard_counts, const std::vector<float>& mean,
                 const std::vector<float>& std, int64_t num_boxes = 0);

}  // namespace hetrain::data
