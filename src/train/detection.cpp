#include "train/detection.hpp"

#include <algorithm>

#include "detect/yolo_decode.hpp"
#include "hetrain/error.hpp"
#include "train/evaluate.hpp"

namespace hetrain::train {

detect::DetectHeadSpec head_spec(const nn::DetectHeadLayout& layout) {
  detect::DetectHeadSpec spec(layout);
  spec.validate();
  return spec;
}

void scale_detector_inputs(BatchSource& source) {
  const size_t channels = size_t(source.info().channels);
  source.set_normalisation(std::vector<float>(channels, 0.0f), std::vector<float>(channels, 1.0f));
}

namespace {
detect::YoloLossConfig loss_config(const nn::DetectHeadLayout& layout, float label_smoothing) {
  detect::YoloLossConfig cfg;
  cfg.label_smoothing = label_smoothing;
  return detect::scaled_for(cfg, head_spec(layout));
}
}  // namespace

DetectionLoss::DetectionLoss(const nn::DetectHeadLayout& layout, float label_smoothing)
    : loss_(head_spec(layout), loss_config(layout, label_smoothing)) {}

namespace {
// A buffer kept between steps, reallocated only when the shape (the local batch) or device changes.
Tensor& keep(Tensor& t, const Shape& shape, Device device) {
  if (t.shape() != shape || t.device() != device) t = Tensor(shape, device);
  return t;
}
}  // namespace

Tensor DetectionLoss::loss_and_gradient(const Tensor& rows, const data::BoxList& boxes, double* loss_sum,
                                        const std::vector<double>& match_norm) {
  const int64_t b = rows.dim(0);
  const Tensor host_rows = rows.to(Device::CPU);
  keep(host_grad_, rows.shape(), Device::CPU);
  const detect::YoloLoss::Result r =
      loss_.compute(host_rows.data(), b, boxes, host_grad_.data(), kDetectionNominalBatch, nullptr, match_norm);
  *loss_sum += r.total * double(b);
  if (rows.device() == Device::CPU) return host_grad_;
  keep(device_grad_, rows.shape(), rows.device());
  device_grad_.copy_from(host_grad_);
  return device_grad_;
}

std::vector<double> DetectionLoss::shared_match_norm(const data::BoxList& boxes, int64_t b,
                                                     BatchStatsExchange& exchange) const {
  const size_t levels = size_t(loss_.spec().levels());
  std::vector<double> sums(levels + 1, 0.0);  // the matches of every level, then the samples
  if (b > 0) {
    const std::vector<int64_t> own = loss_.level_matches(boxes, b);
    for (size_t l = 0; l < levels; ++l) sums[l] = double(own[l]);
    sums[levels] = double(b);
  }
  exchange.sum(sums.data(), int(sums.size()), "the detector's match counts");
  const double share = sums[levels] > 0 ? double(b) / sums[levels] : 0.0;
  std::vector<double> norm(levels);
  for (size_t l = 0; l < levels; ++l) norm[l] = sums[l] * share;
  return norm;
}

double DetectionLoss::loss_sum(const Tensor& host_rows, const data::BoxList& boxes) const {
  const int64_t per_image = host_rows.numel() / std::max<int64_t>(1, host_rows.dim(0));
  double sum = 0;
  data::BoxList one;
  for (int64_t i = 0; i < host_rows.dim(0); ++i) {
    one.offsets = {0, boxes.count(i)};
    one.rows.assign(boxes.box(boxes.offsets[size_t(i)]), boxes.box(boxes.offsets[size_t(i + 1)]));
    sum += loss_.compute(host_rows.data() + i * per_image, 1, one, nullptr, 1.0f).total;
  }
  return sum;
}

namespace {
// One image's detections and ground truths as floats, for the gather to rank 0:
// [detections, truths, then (x0, y0, x1, y1, score, class) per detection, (x0, y0, x1, y1, class) per truth].
void pack_image(const std::vector<detect::Detection>& dets, const std::vector<detect::GroundTruth>& truths,
                std::vector<float>& out) {
  out.push_back(float(dets.size()));
  out.push_back(float(truths.size()));
  for (const detect::Detection& d : dets)
    out.insert(out.end(), {d.box.x0, d.box.y0, d.box.x1, d.box.y1, d.score, float(d.cls)});
  for (const detect::GroundTruth& t : truths) out.insert(out.end(), {t.box.x0, t.box.y0, t.box.x1, t.box.y1, float(t.cls)});
}

void unpack_images(const std::vector<float>& in, detect::MapAccumulator& acc, const ImageDetections& each_image) {
  size_t i = 0;
  for (int64_t image = 0; i < in.size(); ++image) {
    const size_t nd = size_t(in[i]), nt = size_t(in[i + 1]);
    i += 2;
    std::vector<detect::Detection> dets(nd);
    for (detect::Detection& d : dets) {
      d.box = {in[i], in[i + 1], in[i + 2], in[i + 3]};
      d.score = in[i + 4], d.cls = int(in[i + 5]);
      i += 6;
    }
    std::vector<detect::GroundTruth> truths(nt);
    for (detect::GroundTruth& t : truths) {
      t.box = {in[i], in[i + 1], in[i + 2], in[i + 3]};
      t.cls = int(in[i + 4]);
      i += 5;
    }
    if (each_image) each_image(image, dets);
    acc.add_image(dets, truths);
  }
}
}  // namespace

DetectionTotals evaluate_detection(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm,
                                   int64_t chunk, const FirstBatchHook& first_batch,
                                   const ImageDetections& each_image) {
  const nn::DetectHeadLayout* layout = model.detect_head();
  HT_CHECK(layout, "evaluate_detection: the model has no Detect head");
  const DetectionLoss loss(*layout);
  const detect::DetectHeadSpec& spec = loss.yolo().spec();
  DetectionTotals t;
  std::vector<float> packed;
  const int64_t per_image = spec.rows_per_image() * spec.outputs();
  int rank = 0, ranks = 1;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  bool first = rank == 0 && first_batch;
  t.count = double(for_each_eval_batch(model, source, input, comm, chunk,
                                       [&](const data::Batch& batch, const Tensor& images, const Tensor& rows) {
    if (first) {
      first_batch(images.to(Device::CPU), batch.labels, rows);
      first = false;
    }
    t.loss_sum += loss.loss_sum(rows, batch.boxes);
    for (int64_t i = 0; i < rows.dim(0); ++i) {
      const auto candidates = detect::decode_image(spec, rows.data() + i * per_image);
      pack_image(detect::nms(candidates), detect::ground_truths(spec, batch.boxes, i), packed);
    }
  }));

  // Rank 0 scores every image, in rank order = dataset order.
  int mine = int(packed.size());
  std::vector<int> sizes(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  HT_MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm));
  std::vector<float> all;
  if (rank == 0) {
    int64_t total = 0;
    for (int r = 0; r < ranks; ++r) offsets[size_t(r)] = int(total), total += sizes[size_t(r)];
    HT_CHECK(total < (int64_t(1) << 31), "evaluation: too many detections to gather (", total, " floats)");
    all.resize(size_t(total));
  }
  HT_MPI_CHECK(MPI_Gatherv(packed.data(), mine, MPI_FLOAT, all.data(), sizes.data(), offsets.data(), MPI_FLOAT, 0,
                           comm));
  double v[4] = {t.loss_sum, t.count, 0, 0};
  if (rank == 0) {
    detect::MapAccumulator acc(spec.num_classes);
    unpack_images(all, acc, each_image);
    t.map = acc.compute();
    v[2] = t.map.map50, v[3] = t.map.map50_95;
  }
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, comm));
  HT_MPI_CHECK(MPI_Bcast(v + 2, 2, MPI_DOUBLE, 0, comm));
  t.loss_sum = v[0], t.count = v[1], t.map.map50 = v[2], t.map.map50_95 = v[3];
  return t;
}

}  // namespace hetrain::train
