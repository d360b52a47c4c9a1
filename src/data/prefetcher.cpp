// Prefetcher: two pipeline stages on their own threads. The reader thread reads submitted batches (uint8)
// in order, at most `depth` batches ahead of next(); the augmentation thread converts each read batch to a
// normalised float tensor (or, Raw form, only draws its crops and flips for the device to apply). So reading
// batch k+1 overlaps converting batch k, and both overlap the trainer's compute. Errors are stored with their
// batch and rethrown by next(). Detection datasets: the reader also delivers each sample's boxes (and reads
// the partners of its mosaics), and the augmentation stage composes the samples as YOLOv5 does
// (augment_detection_batch) and moves the boxes with any crop and flip (in both forms). JPEG datasets: the
// reader reads the stored bytes, and the augmentation stage first decodes them on `decode_threads` threads
// (through RandomResizedCrop's window or the evaluation transform), so decoding overlaps reading and compute.
#include <algorithm>
#include <chrono>

#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

Prefetcher::Prefetcher(Dataset& ds, int depth, int augment_threads, int decode_threads)
    : ds_(ds), depth_(depth), threads_(augment_threads), decode_threads_(decode_threads > 0 ? decode_threads : augment_threads) {
  HT_CHECK(depth >= 1, "prefetch depth must be at least 1, got ", depth);
  HT_CHECK(augment_threads >= 1, "augmentation threads must be at least 1, got ", augment_threads);
  HT_CHECK(decode_threads >= 0, "decode threads must not be negative (0: as many as augmentation threads), got ",
           decode_threads);
  reader_ = std::thread([this] { read_loop(); });
  augmenter_ = std::thread([this] { augment_loop(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  reader_.join();
  augmenter_.join();
}

void Prefetcher::submit(std::vector<int64_t> indices, bool augment, const AugmentConfig& aug, uint64_t aug_seed,
                        BatchForm form) {
  auto job = std::make_shared<Job>();
  job->indices = std::move(indices);
  job->augment = augment;
  job->aug = aug;
  job->seed = aug_seed;
  job->form = form;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

int64_t Prefetcher::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(jobs_.size());
}

void Prefetcher::read_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    std::vector<uint8_t> raw;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Read when a job is waiting and fewer than `depth` batches are read ahead of next().
      cv_.wait(lock, [&] { return stop_ || (next_to_read_ < jobs_.size() && int(next_to_read_) < depth_); });
      if (stop_) return;
      job = jobs_[next_to_read_];
      if (!raw_pool_.empty()) {
        raw = std::move(raw_pool_.back());
        raw_pool_.pop_back();
      }
    }
    try {
      const DatasetInfo& info = ds_.info();
      // A detection sample composed as YOLOv5 does (a mosaic) needs its partners' pixels and boxes too.
      if (composes(*job))
        job->reads = plan_detection_reads(job->aug.detect, job->seed, job->indices, info.num_samples, info.height,
                                          info.width);
      const std::vector<int64_t>& read = read_list(*job);
      const size_t n = read.size();
      job->result.labels.resize(n);
      BoxList* boxes = ds_.has_boxes() ? &job->result.boxes : nullptr;
      if (info.jpeg) {  // decoded by the augmentation stage
        ds_.read_encoded(read, job->encoded, job->result.labels.data(), boxes);
      } else {
        if (raw.size() < n * size_t(info.sample_bytes())) raw.resize(n * size_t(info.sample_bytes()));
        ds_.read(read, raw.data(), job->result.labels.data(), boxes);
      }
      job->result.labels.resize(job->indices.size());
    } catch (...) {
      job->error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job->raw = std::move(raw);
      ++next_to_read_;
    }
    cv_.notify_all();
  }
}

void Prefetcher::augment_loop() {
  // Float batches handed out are recycled once the trainer has let go of them (storage no longer shared):
  // a fresh 224x224 batch costs more in page faults than reading it.
  std::vector<Tensor> pool;
  auto batch_tensor = [&pool](const Shape& shape) {
    const int64_t numel = shape_numel(shape);
    for (Tensor& t : pool)
      if (!t.storage_shared() && t.numel() >= numel) return t.slice0(0, numel).reshape(shape);
    pool.push_back(Tensor({std::max<int64_t>(numel, 1)}));
    return pool.back().slice0(0, numel).reshape(shape);
  };
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || next_to_augment_ < next_to_read_; });
      if (stop_) return;
      job = jobs_[next_to_augment_];
    }
    if (!job->error) {
      try {
        const DatasetInfo& info = ds_.info();
        const int64_t n = int64_t(job->indices.size());
        decode_or_crop(*job);
        if (composes(*job)) compose_detection(*job);
        if (info.has_boxes && job->augment)
          move_boxes(job->result.boxes, draw_crop_flip(job->indices, true, job->aug, job->seed),
                     crop_pad(true, job->aug), info.height, info.width);
        if (job->form == BatchForm::Raw) {
          // Hand the read buffer over (no copy); the reader allocates a new one for a later batch.
          job->result.raw = std::move(job->raw);
          job->result.raw.resize(size_t(n) * size_t(info.sample_bytes()));  // pool buffers may be larger
          job->result.crop_flip = draw_crop_flip(job->indices, job->augment, job->aug, job->seed);
          job->result.crop_pad = crop_pad(job->augment, job->aug);
        } else {
          job->result.images = batch_tensor({n, info.channels, info.height, info.width});
          augment_batch(job->raw.data(), job->indices, info, job->augment, job->aug, job->seed,
                        job->result.images.data(), threads_);
        }
        job->result.indices = job->indices;
      } catch (...) {
        job->error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (job->raw.capacity() > 0) raw_pool_.push_back(std::move(job->raw));  // empty once handed over
      job->done = true;
      ++next_to_augment_;
    }
    cv_.notify_all();
  }
}

bool Prefetcher::composes(const Job& job) const {
  return job.augment && job.aug.detection && ds_.has_boxes();
}

const std::vector<int64_t>& Prefetcher::read_list(const Job& job) const {
  return composes(job) ? job.reads.read : job.indices;
}

// The stage's first step: a JPEG batch is decoded into job.raw (uint8 C × H × W, as a raw dataset reads);
// RandomResizedCrop, when asked for, is drawn while decoding or applied to the read pixels.
void Prefetcher::decode_or_crop(Job& job) {
  const DatasetInfo& info = ds_.info();
  const bool resized_crop = job.augment && job.aug.resized_crop;
  const std::vector<int64_t>& read = read_list(job);
  if (info.jpeg) {
    const size_t bytes = read.size() * size_t(info.sample_bytes());
    if (job.raw.size() < bytes) job.raw.resize(bytes);
    decode_batch(job.encoded, read, info, resized_crop, job.seed, job.raw.data(), decode_threads_);
    job.encoded = EncodedImages();
  } else if (resized_crop) {
    resized_crop_batch(job.raw.data(), read, info, job.seed, threads_);
  }
}

// Replaces the read samples (the batch's, then its mosaics' partners) by the batch's composed samples and
// their boxes; the read buffer goes back to the pool.
void Prefetcher::compose_detection(Job& job) {
  const DatasetInfo& info = ds_.info();
  std::vector<uint8_t> composed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!raw_pool_.empty()) {
      composed = std::move(raw_pool_.back());
      raw_pool_.pop_back();
    }
  }
  const size_t bytes = job.indices.size() * size_t(info.sample_bytes());
  if (composed.size() < bytes) composed.resize(bytes);
  BoxList boxes;
  augment_detection_batch(job.aug.detect, job.seed, job.indices, job.reads, job.raw.data(), job.result.boxes, info,
                          composed.data(), boxes, threads_);
  job.result.boxes = std::move(boxes);
  std::swap(job.raw, composed);
  std::lock_guard<std::mutex> lock(mu_);
  raw_pool_.push_back(std::move(composed));
}

Batch Prefetcher::next() {
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<Job> job;
  {
    std::unique_lock<std::mutex> lock(mu_);
    HT_CHECK(!jobs_.empty(), "Prefetcher::next() with no batch submitted");
    job = jobs_.front();
    cv_.wait(lock, [&] { return job->done; });
    jobs_.pop_front();
    --next_to_read_;
    --next_to_augment_;
  }
  cv_.notify_all();
  if (job->error) std::rethrow_exception(job->error);
  Batch b = std::move(job->result);
  b.wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

}  // namespace hetrain::data
