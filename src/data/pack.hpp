// data/pack.hpp — converting sources (IDX, CIFAR, image folders, synthetic; for detection: generated
// Fashion-MNIST scenes and COCO) into dataset files.
//
// A SampleSource gives random access to decoded samples; pack() writes one logical dataset (single file
// or shards + index) and an optional validation split, in parallel over the ranks of a communicator
// (rank r writes shards r, r+size, ...). hetrain-pack (data_tools/) is the command line around this.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/writer.hpp"

namespace hetrain::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  // Decodes sample i into image [C, H, W] and *label. Thread-safe; throws hetrain::Error naming the input
  // file and the entry or offset when the input is bad.
  virtual void get(int64_t i, uint8_t* image, int32_t* label) const = 0;
  // Detection sources (meta.has_boxes) override this: sample i with its boxes, kBoxFields floats each
  // (class, cx, cy, w, h normalised; docs/dataset-format.md). The default is get() with no boxes.
  virtual void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const;
  // Sources with meta.has_origins override this: sample i's image id and size before letterboxing.
  virtual SampleOrigin origin(int64_t /*i*/) const { return {}; }
  // Sources with meta.jpeg override this: sample i as a JPEG file (`jpeg`), the same sample decoded as the
  // reader decodes it for evaluation (image, C × H × W: for the statistics) and its label.
  virtual void get_encoded(int64_t i, std::vector<uint8_t>& jpeg, uint8_t* image, int32_t* label) const;
  DatasetMeta meta;
};

// The label a detection image carries in /labels (which every dataset has): the class of its largest box,
// 0 for an image without boxes. Detectors read /boxes; the label only summarises (inspect's histogram).
int32_t label_of_boxes(const std::vector<float>& boxes);

// IDX (MNIST format; plain or gzip): images idx3 uint8 [N, H, W], labels idx1 uint8 [N].
// num_classes 0 = max label + 1 (at least 10 when that fits the labels); class_names optional.
std::unique_ptr<SampleSource> open_idx(const std::string& images, const std::string& labels, int num_classes,
                                       const std::vector<std::string>& class_names);
// CIFAR binary batches: CIFAR-10 records <1 label byte><3072 pixel bytes>, CIFAR-100 records
// <coarse><fine><3072>. variant 10 or 100; fine selects the fine (100-way) label of CIFAR-100.
std::unique_ptr<SampleSource> open_cifar(const std::vector<std::string>& files, int variant, bool fine,
                                         const std::vector<std::string>& class_names);
// ImageFolder: root/<class>/<image>.{jpg,jpeg,png}; classes are the sorted sub-folder names. Each image is
// decoded (channels 1 = grey, 3 = RGB), its shorter side resized to `size` (bilinear), centre-cropped.
// With JPEG storage (docs/dataset-format.md, "JPEG storage") each image is kept whole as a JPEG file instead:
// its shorter side reduced to `stored_size` when longer, re-encoded at `quality`; a JPEG file already small
// enough (and grey or YCbCr as `channels` wants) is kept byte for byte. Batches are decoded to size × size.
struct FolderStorage {
  bool jpeg = false;
  int stored_size = 0;  // 0: size · 256/224 rounded (the evaluation transform's resize)
  int quality = 90;
};
// max_pixels: an image whose header claims more pixels (width x height) is refused, naming the file, before
// it is decoded (0 = no limit); the default is Pillow's limit, kDefaultMaxPixels in data/image.hpp. Images are
// told apart by their first bytes, not their names (a PNG named .jpg is read as a PNG).
std::unique_ptr<SampleSource> open_folder(const std::string& root, int size, int channels,
                                          const FolderStorage& storage = {}, int64_t max_pixels = 89478485);
// Seeded images with a learnable class structure (a smooth per-class pattern plus noise).
std::unique_ptr<SampleSource> open_synthetic(uint64_t seed, int64_t count, int channels, int height, int width,
                                             int num_classes);

// Generated detection scenes (docs/detection.md): sample i pastes 1..max_items items of `items` (a
// classification source of small grey images with a dark background, e.g. Fashion-MNIST's IDX files), each
// at 1-3x scale, onto a noisy canvas of 128-320 px per side, then letterboxes it to size x size.
// Boxes are the tight bounds of each pasted item's nonzero pixels; classes are the items' classes.
// Everything derives from (seed, split_tag, i): any rank generates any sample, the same one every time.
struct DetectSyntheticOptions {
  uint64_t seed = 1;
  uint64_t split_tag = 0;  // mixed into the seed, so the splits' canvases differ too (0 = train, 1 = test)
  int64_t count = 1000;
  int max_items = 4;
  int size = 320;
  int channels = 1;  // 1 = grey; 3 = items and canvas tinted with seeded colours
};
std::unique_ptr<SampleSource> open_detect_synthetic(std::shared_ptr<const SampleSource> items,
                                                    const DetectSyntheticOptions& opt);
// COCO-format object detection (instances_*.json + an image folder): images in the order of their ids,
// each letterboxed to size x size; category ids mapped to contiguous classes in increasing id order, their
// names kept; crowd annotations skipped; boxes converted to normalised (cx, cy, w, h).
// Images are read only when they are regular files (a FIFO is refused, not waited on); max_pixels as for
// open_folder.
std::unique_ptr<SampleSource> open_coco(const std::string& images_dir, const std::string& annotations, int size,
                                        int channels, int64_t max_pixels = 89478485);

struct PackOptions {
  std::string output;       // single file, or the index file when sharded
  int shards = 1;           // number of shard files (1 = one plain file)
  int64_t shard_size = 0;   // > 0: at most this many samples per shard (overrides shards)
  WriteOptions write;
  double val_fraction = 0;  // fraction of samples moved to val_output (seeded selection)
  std::string val_output;
  uint64_t split_seed = 0;
  bool progress = true;     // progress bar on stderr (rank 0)
  MPI_Comm comm = MPI_COMM_SELF;
  // The input files as (option, path), e.g. ("--images", "train-images.gz"): no output may be one of them
  // (compared by device and inode, so another name or a link for the same file counts too).
  std::vector<std::pair<std::string, std::string>> inputs;
};

struct PackResult {
  int64_t train_count = 0, val_count = 0;
  int64_t train_boxes = 0, val_boxes = 0;  // detection datasets
  std::vector<std::string> files;  // every file written (indices and shards)
};

// Collective over opt.comm. On any error on any rank, every rank removes its temp files and throws.
// Before writing it refuses outputs that are the same file as an input or as another output, and (rank 0)
// removes stale temporaries "<output>.tmp-<pid>" whose process no longer runs on this host, saying so on
// stderr, one line per file.
PackResult pack(const SampleSource& src, const PackOptions& opt);

// Removes "<output>.tmp-<pid>" files next to each of `outputs` whose pid is not a live process on this host
// (kill(pid, 0) fails with ESRCH), except this process's own. Returns "<file> (process <pid> is gone)" for
// each file removed.
std::vector<std::string> remove_stale_temporaries(const std::vector<std::string>& outputs);

// Name of shard s of S for an output path: "out/train.h5" → "out/train-00001-of-00004.h5".
std::string shard_path(const std::string& output, int s, int S);

// Progress on stderr: a redrawn bar on a terminal, a line every 10% otherwise.
class Progress {
 public:
  Progress(std::string label, int64_t total, bool enabled);
  void add(int64_t n);
  void finish();

 private:
  std::string label_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_;
  int last_decile_ = 0;
  double start_;
};

}  // namespace hetrain::data
