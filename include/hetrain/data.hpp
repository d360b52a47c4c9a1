// hetrain/data.hpp — datasets: the HDF5 format v1 reader, the epoch plan, augmentation and the prefetcher.
//
// Format (docs/dataset-format.md): uint8 /images [N, C, H, W], int32 /labels [N], root attributes
// format="hetrain-dataset", version=1, num_classes, class_names, mean, std, source, created. A big dataset
// is an index file listing shard files; Dataset opens either as one logical dataset and opens a shard only
// when a read touches it. A detection dataset (task="detection") adds variable-length boxes per image:
// float32 /boxes [M, 5] = (class, cx, cy, w, h) normalised to [0, 1], int64 /box_offsets [N+1].
//
// HDF5 here is built without thread safety: every HDF5 call in hetrain (reader thread, checkpoints, tools)
// must hold hdf5_mutex().
//
// A dataset may store its images as JPEG instead (root attribute storage = "jpeg", hetrain-pack folder
// --store jpeg): uint8 /jpeg [total bytes] with int64 /jpeg_offsets [N+1], each image at its stored size.
// Its 'shape' is the C×H×W that batches have: the reader decodes each sample to it (docs/dataset-format.md).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hetrain/tensor.hpp"

namespace hetrain::data {

constexpr const char* kFormatName = "hetrain-dataset";
constexpr int kFormatVersion = 1;
// Largest sample hetrain handles: C·H·W bytes (256 MiB; 1 GiB once converted to floats). Larger shapes are
// refused where they enter (hetrain-pack options, a file's 'shape' attribute), naming the option or file.
constexpr int64_t kMaxSampleBytes = int64_t(1) << 28;
// Throws "<what>: a CxHxW sample is N bytes, more than hetrain handles (...)" for a shape that is not
// positive or exceeds kMaxSampleBytes; products are computed in 64 bits. `what` names the option or file.
void check_sample_shape(const std::string& what, int64_t channels, int64_t height, int64_t width);

// The process-wide lock for the (non-thread-safe) HDF5 library.
std::mutex& hdf5_mutex();

struct DatasetInfo {
  std::string path;
  int64_t num_samples = 0;
  int channels = 0, height = 0, width = 0, num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<float> mean, std;  // per channel, on the [0,1] pixel scale
  std::string source, created;
  std::vector<std::string> shard_files;  // absolute or relative to cwd; one entry (path) for a single file
  std::vector<int64_t> shard_counts;
  bool has_boxes = false;  // a detection dataset (root attribute task = "detection"): /boxes, /box_offsets
  int64_t num_boxes = 0;   // M of the logical dataset (0 for classification)
  bool jpeg = false;       // storage = "jpeg": samples are JPEG files, decoded to C×H×W when read
  int64_t sample_bytes() const { return int64_t(channels) * height * width; }
};

// The JPEG bytes of n samples, one after another: sample i is bytes[offsets[i] .. offsets[i+1]).
struct EncodedImages {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets;  // [n + 1]
  int64_t samples() const { return offsets.empty() ? 0 : int64_t(offsets.size()) - 1; }
};

// Where a dataset's images came from, as `hetrain-pack coco` records it (docs/dataset-format.md): each
// image's id and its width and height before letterboxing, and each class's category id. `present` is
// false for a dataset without them.
struct ImageOrigins {
  bool present = false;
  std::vector<int64_t> image_ids;     // [N]
  std::vector<int32_t> sizes;         // [N, 2]: width, height
  std::vector<int64_t> category_ids;  // [K], or empty
};
// Reads them from the dataset's file or shards, in sample order; throws naming a file whose arrays are
// missing or mis-sized.
ImageOrigins read_image_origins(const DatasetInfo& info);

// Boxes of a detection dataset, one row of 5 floats each: (class, cx, cy, w, h), the class an integer in
// [0, num_classes), the centre and size normalised to [0, 1] by the image's width and height
// (docs/dataset-format.md, "Detection datasets").
constexpr int kBoxFields = 5;
struct BoxList {  // the boxes of n samples, in sample order
  std::vector<float> rows;       // [M, 5]
  std::vector<int64_t> offsets;  // [n + 1]: sample i owns rows [offsets[i], offsets[i+1]); empty when n = 0
  int64_t samples() const { return offsets.empty() ? 0 : int64_t(offsets.size()) - 1; }
  int64_t count(int64_t i) const { return offsets[i + 1] - offsets[i]; }
  const float* box(int64_t row) const { return rows.data() + row * kBoxFields; }
};

// For the trainer and tools: a dataset of the wrong kind gets one line naming its file. `who` says what
// needs the kind, e.g. "model yolov5n.yaml" → "<file>: a classification dataset (no /boxes), but model
// yolov5n.yaml needs a detection dataset (...)".
void require_detection(const DatasetInfo& info, const std::string& who);
void require_classification(const DatasetInfo& info, const std::string& who);

class Dataset {  // one logical dataset: a single file or a shard index + shard files
 public:
  // Validates format name/version, shapes, counts; clear hetrain::Error naming the file and problem.
  static std::unique_ptr<Dataset> open(const std::string& path);
  ~Dataset();
  const DatasetInfo& info() const { return info_; }
  // Replaces the per-channel mean and std that batches are normalised by, (x/255 − mean)/std (default: the
  // file's statistics; a detector takes x/255, mean 0 and std 1). Before the first batch is requested.
  void set_normalisation(std::vector<float> mean, std::vector<float> std);
  // Reads the given samples (any order, duplicates allowed) into images [n, C, H, W] uint8 and labels [n];
  // coalesces runs of consecutive indices into one hyperslab read; opens only the shards it touches.
  // labels may be null. Not reentrant: one reader thread per Dataset.
  // boxes (detection datasets only; may be null): replaced by the boxes of `indices`, in their order.
  // A JPEG dataset's samples are decoded here with the evaluation transform (centre_window), on this thread.
  void read(const std::vector<int64_t>& indices, uint8_t* images, int32_t* labels, BoxList* boxes = nullptr);
  // JPEG datasets: the stored bytes of `indices` (any order, duplicates allowed), to decode elsewhere
  // (decode_batch); one H5Dread per run of consecutive indices. Not reentrant, like read().
  void read_encoded(const std::vector<int64_t>& indices, EncodedImages& out, int32_t* labels,
                    BoxList* boxes = nullptr);
  bool has_boxes() const { return info_.has_boxes; }
  // Optional per-node in-memory cache: all ranks of node_comm share one copy in an MPI shared-memory window.
  // Collective over node_comm (every rank calls it); each node rank loads a slice, then reads come from memory.
  // When loading fails on any node rank, it throws on every node rank (the failing one with its reason).
  // The window is freed in the destructor, which is then collective too: destroy on all node ranks.
  void enable_node_cache(MPI_Comm node_comm);
  // Every label in sample order (opens every shard; labels are kept in memory anyway).
  std::vector<int32_t> all_labels();
  // Every box in sample order (detection datasets; opens every shard; boxes are kept in memory anyway).
  BoxList all_boxes();
  bool node_cache_enabled() const { return cache_ != nullptr; }
  // Diagnostics: shards opened so far and H5Dread calls issued (coalescing tests, benchmarks).
  int shards_opened() const;
  int64_t read_calls() const { return read_calls_; }

  struct Shard;  // implementation detail (src/data/dataset.cpp)

 private:
  Dataset() = default;
  Shard& shard(int s);  // opens on first use
  int shard_of(int64_t index) const;  // the shard holding global sample `index`
  void gather_boxes(const std::vector<int64_t>& indices, BoxList& out) const;  // their shards are open
  // The steps of read() (src/data/dataset.cpp).
  struct ReadPlan;
  ReadPlan plan_read(const std::vector<int64_t>& indices) const;
  std::vector<size_t> locate(ReadPlan& plan, std::unique_lock<std::mutex>& lock);
  void read_with_hdf5(ReadPlan& plan, const std::vector<size_t>& slow, uint8_t* images);
  void copy_out(const ReadPlan& plan, uint8_t* images, int32_t* labels);
  DatasetInfo info_;
  std::vector<int64_t> shard_begin_;  // first global index of each shard, plus N at the end
  std::vector<std::unique_ptr<Shard>> shards_;
  int64_t read_calls_ = 0;
  // Reused between reads: first-touch page faults of fresh buffers cost more than the reads themselves.
  std::vector<uint8_t> staging_;
  // node cache
  MPI_Win cache_win_ = MPI_WIN_NULL;
  const uint8_t* cache_ = nullptr;
  std::vector<int32_t> cache_labels_;
};

enum class LastBatch { Drop, Partial };

class EpochPlan {  // seeded permutation per epoch, identical on every rank without communication
 public:
  EpochPlan(uint64_t seed, int64_t num_samples, int64_t global_batch, LastBatch last, bool shuffle = true);
  int64_t steps_per_epoch() const { return steps_; }
  int64_t batch_size(int64_t step) const;  // global batch of that step (smaller for a Partial last batch)
  // Sample indices [offset, offset+count) of step `step` of epoch `epoch` — the slice of rank r is
  // offset = Σ_{q<r} b_q, count = b_r. Thread-safe.
  std::vector<int64_t> slice(int64_t epoch, int64_t step, int64_t offset, int64_t count) const;
  // The samples at positions [position, position+count) of epoch `epoch`'s order, any positions within
  // the epoch (the asynchronous modes hand out samples by a global counter, not by steps). Thread-safe.
  std::vector<int64_t> span(int64_t epoch, int64_t position, int64_t count) const;
  // The whole permutation of an epoch (tests, tools).
  std::vector<int64_t> permutation(int64_t epoch) const;

 private:
  uint64_t seed_;
  int64_t n_, batch_, steps_;
  bool shuffle_;
  mutable std::mutex mu_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_perm_;
};

// YOLOv5's training augmentations of a detection sample, its defaults YOLOv5's hyperparameters
// (docs/detection.md, "Augmentation"). Each is off at 0.
struct DetectAugment {
  float mosaic = 1.0f;      // probability that a sample becomes a mosaic of itself and 3 partner images
  float scale = 0.5f;       // random affine: zoom uniform in [1 − scale, 1 + scale]
  float translate = 0.1f;   // random affine: shift uniform in ±translate × the image's width / height
  float hsv_h = 0.015f;     // hue, saturation and value gains uniform in [1 − g, 1 + g]
  float hsv_s = 0.7f;
  float hsv_v = 0.4f;
  float fliplr = 0.5f;      // probability of a left-right flip
  // Throws one line naming the option (--mosaic ...) whose value is out of range.
  void check() const;
  std::string describe() const;  // "mosaic 1, scale ±0.5, translate ±0.1, HSV gains ±0.015/0.7/0.4, flip 0.5"
};

struct AugmentConfig {
  AugmentConfig() = default;
  AugmentConfig(bool crop, int padding, bool flip) : random_crop(crop), crop_padding(padding), hflip(flip) {}
  bool random_crop = false;
  int crop_padding = 4;
  bool hflip = false;
  // RandomResizedCrop + flip (--augment rrc, see draw_resized_crop), applied to the uint8 samples as they are
  // decoded (JPEG datasets) or read, before anything else; use it without random_crop and hflip.
  bool resized_crop = false;
  // Detection datasets: compose each sample with `detect` (before any crop and flip above).
  bool detection = false;
  DetectAugment detect;
};

// images: the samples `indices` (their dataset indices), C×H×W uint8 each → out float [n, C, H, W]: optional
// random crop (zero padding) and horizontal flip, then (x/255 − mean[c]) / std[c]. The sample with dataset
// index k draws from (aug_seed, k) only: the result depends on neither `threads`, nor the sample's position
// in the batch, nor which rank holds it (the trainer's aug_seed depends only on --seed and the epoch).
void augment_batch(const uint8_t* images, const std::vector<int64_t>& indices, const DatasetInfo& info,
                   bool augment, const AugmentConfig& aug, uint64_t aug_seed, float* out, int threads);
// Positional form: sample i of the batch draws as dataset index i (for callers without indices).
void augment_batch(const uint8_t* images, int64_t n, const DatasetInfo& info, bool augment,
                   const AugmentConfig& aug, uint64_t aug_seed, float* out, int threads);

// The same crops and flips for a device to apply (cuda::normalize_crop_flip's convention): int32 [n, 3] =
// (y0, x0, flip) per sample, (y0, x0) the crop corner in the image zero-padded by crop_pad() on each side,
// 0 ≤ y0, x0 ≤ 2·pad. Drawn exactly as augment_batch draws them (keyed by the dataset index), so CPU and
// GPU ranks augment alike. Not augmenting (or no crop / no flip configured) gives zeros there.
int crop_pad(bool augment, const AugmentConfig& aug);  // aug.crop_padding when cropping, else 0
std::vector<int32_t> draw_crop_flip(const std::vector<int64_t>& indices, bool augment, const AugmentConfig& aug,
                                    uint64_t aug_seed);
// Positional form (samples keyed 0..n-1), as augment_batch's; its own name, so that a one-index list {i} cannot
// silently become n = i.
std::vector<int32_t> draw_crop_flip_positions(int64_t n, bool augment, const AugmentConfig& aug, uint64_t aug_seed);

// Moves boxes with the pixels of draw_crop_flip's crops and flips (`crop_flip` [n, 3], `pad` its
// crop_pad(), images height × width): the crop shifts them and clips them to the image, the flip mirrors
// them (cx → 1 − cx). A clipped box keeps its place only while it has width, height and at least 10 % of
// its area inside the image; otherwise it is dropped (docs/detection.md).
void move_boxes(BoxList& boxes, const std::vector<int32_t>& crop_flip, int pad, int height, int width);

// The draws of one detection sample, from Rng(aug_seed, its dataset index) only (through its own stream, so
// that crop_flip's draws stay as they were): whether it is a mosaic and with which 3 partners, the mosaic
// centre, the affine zoom and shift, the HSV gains and the flip. Every value is drawn whatever the settings,
// so turning one augmentation off leaves the others' draws alone.
struct DetectDraw {
  bool mosaic = false;
  int64_t partners[3] = {-1, -1, -1};  // dataset indices (mosaic only)
  double centre_x = 0, centre_y = 0;   // the mosaic centre on the 2H × 2W canvas, in [W/2, 3W/2) × [H/2, 3H/2)
  double zoom = 1, shift_x = 0, shift_y = 0;  // shift: fractions of the width / height, around 0
  double gain[3] = {1, 1, 1};                 // hue, saturation, value
  bool flip = false;
};
DetectDraw draw_detection(const DetectAugment& a, uint64_t aug_seed, int64_t index, int64_t num_samples, int height,
                          int width);

// What a batch of detection samples reads: `read` = the batch's indices, then the partners of its mosaics;
// sample i's partners sit at read[first_partner[i] .. +3) (first_partner[i] = -1: not a mosaic).
struct DetectReads {
  std::vector<int64_t> read;
  std::vector<int64_t> first_partner;
};
DetectReads plan_detection_reads(const DetectAugment& a, uint64_t aug_seed, const std::vector<int64_t>& indices,
                                 int64_t num_samples, int height, int width);

// Composes each sample of `plan` as YOLOv5 trains on it: a mosaic of 4 (or the image alone) under a random
// affine, a grey (114) border where nothing lands; HSV gains; a left-right flip. `images` and `boxes` hold
// the samples of plan.read in that order; `out` receives n = indices.size() images (uint8 C × H × W each)
// and `out_boxes` their boxes, moved with the pixels: clipped to the image and dropped when under 2 pixels
// wide or high, under 10 % of their area before clipping, or more elongated than 100:1 (docs/detection.md).
void augment_detection_batch(const DetectAugment& a, uint64_t aug_seed, const std::vector<int64_t>& indices,
                             const DetectReads& plan, const uint8_t* images, const BoxList& boxes,
                             const DatasetInfo& info, uint8_t* out, BoxList& out_boxes, int threads);

// Where a sample's pixels come from before they are resized to the batch's H × W: a window of the stored
// image, in its pixel coordinates (fractional for the evaluation transform), then an optional left-right flip.
struct CropWindow {
  double x0 = 0, y0 = 0, width = 0, height = 0;
  bool flip = false;
};
// torchvision's RandomResizedCrop (area 8-100 % of the image, aspect ratio 3/4-4/3, 10 tries, then the
// centre crop nearest in ratio) and a flip with probability 1/2, drawn from (aug_seed, dataset index) only
// (its own stream: crop_flip's draws stay as they were), so the window never depends on rank or split.
CropWindow draw_resized_crop(uint64_t aug_seed, int64_t index, int image_height, int image_width);
// The evaluation transform of torchvision's ImageNet recipe: the shorter side resized to 256/224 of the
// batch's shorter side (rounded), then the centre out_height × out_width crop.
CropWindow centre_window(int image_height, int image_width, int out_height, int out_width);
// Bilinear resampling (pixel centres aligned) of `window` of an image to out_height × out_width, CHW into
// `out`. The image is `channels` planes addressed as pixel(y, x, c) = image[y·row + x·step + c·plane].
struct PixelLayout {
  int height = 0, width = 0, channels = 0;
  int64_t row = 0, step = 0, plane = 0;
  static PixelLayout hwc(int h, int w, int c) { return {h, w, c, int64_t(w) * c, c, 1}; }
  static PixelLayout chw(int h, int w, int c) { return {h, w, c, w, 1, int64_t(h) * w}; }
};
void resample_window(const uint8_t* image, const PixelLayout& layout, const CropWindow& window, int out_height,
                     int out_width, uint8_t* out);

// Decodes JPEG samples to the dataset's C × H × W: sample i (dataset index indices[i]) through
// draw_resized_crop when `resized_crop`, else through centre_window. libjpeg-turbo scales by k/8 in its
// inverse DCT where the window stays at least H × W (cheaper, and no aliasing). Corrupt bytes throw
// "<info.path>: sample <index>: corrupt JPEG ...". The result depends only on the bytes, the seed and the
// index, never on `threads`.
void decode_batch(const EncodedImages& in, const std::vector<int64_t>& indices, const DatasetInfo& info,
                  bool resized_crop, uint64_t aug_seed, uint8_t* out, int threads);
// Raw-stored samples (C × H × W uint8 each, in place): RandomResizedCrop back to H × W and the flip.
void resized_crop_batch(uint8_t* images, const std::vector<int64_t>& indices, const DatasetInfo& info,
                        uint64_t aug_seed, int threads);

enum class BatchForm {
  Float,  // images: augmented and normalised on the host (CPU ranks)
  Raw,    // raw + crop_flip: the bytes as read, for the device to augment and normalise (GPU ranks)
};

struct Batch {
  Tensor images;  // Float form: float [n, C, H, W] normalised with the dataset mean/std; undefined in Raw form
  // Raw form only (empty in Float form): 4× fewer bytes to move to the device than floats.
  std::vector<uint8_t> raw;        // uint8 [n, C, H, W]
  std::vector<int32_t> crop_flip;  // int32 [n, 3], see draw_crop_flip
  int crop_pad = 0;                // zero padding per side that crop_flip's corners assume
  std::vector<int32_t> labels;
  // Detection datasets: each sample's boxes, already moved with its crop and flip (both forms); empty
  // (no offsets) for a classification dataset.
  BoxList boxes;
  std::vector<int64_t> indices;
  double wait_seconds = 0;  // time next() blocked
};

class Prefetcher {  // a reader thread and an augmentation stage, `depth` batches ahead
 public:
  // augment_threads: threads that convert one batch (the augmentation stage's own thread included);
  // decode_threads: threads that decode one batch of a JPEG dataset (0: as many as augment_threads).
  Prefetcher(Dataset& ds, int depth, int augment_threads, int decode_threads = 0);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Queue one batch: read `indices`, augment when `augment` (sample k drawn from (aug_seed, k), see
  // augment_batch: the same seed and index give the same crop and flip in any batch).
  // BatchForm::Raw hands back the read bytes and the drawn crops/flips instead of converting them.
  void submit(std::vector<int64_t> indices, bool augment, const AugmentConfig& aug, uint64_t aug_seed,
              BatchForm form = BatchForm::Float);
  Batch next();  // batches come back in submission order; rethrows reader errors
  int64_t pending() const;  // submitted and not yet returned by next()

 private:
  struct Job {
    std::vector<int64_t> indices;
    bool augment;
    AugmentConfig aug;
    uint64_t seed;
    BatchForm form;
    DetectReads reads;         // detection samples composed as YOLOv5 does: what the reader read for them
    EncodedImages encoded;     // JPEG datasets: the bytes read, decoded into `raw` by the augmentation stage
    std::vector<uint8_t> raw;  // read, not yet augmented (a buffer from raw_pool_)
    Batch result;
    std::exception_ptr error;
    bool done = false;
  };
  void read_loop();     // reads job k+1 ...
  void augment_loop();  // ... while job k is converted to float (or drawn, Raw form): the stages overlap
  bool composes(const Job& job) const;  // a detection batch augmented as YOLOv5 does
  const std::vector<int64_t>& read_list(const Job& job) const;  // what the reader reads for the job
  void decode_or_crop(Job& job);  // JPEG: decode into job.raw; raw + resized_crop: crop job.raw in place
  void compose_detection(Job& job);
  Dataset& ds_;
  int depth_, threads_, decode_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // submission order; front is the next to return
  size_t next_to_read_ = 0;                // index into jobs_ of the first job not yet read
  size_t next_to_augment_ = 0;             // index into jobs_ of the first job read but not yet augmented
  std::vector<std::vector<uint8_t>> raw_pool_;  // recycled read buffers (fresh ones pay first-touch faults)
  bool stop_ = false;
  std::thread reader_, augmenter_;
};

}  // namespace hetrain::data
