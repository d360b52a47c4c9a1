// YOLOv5's loss (docs/detection.md, "Loss and targets"). Matching runs in float, as YOLOv5 does it in
// float32, so the same boxes pick the same anchors and cells; the loss and its gradient run in double.
#include "detect/yolo_loss.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "hetrain/error.hpp"

namespace hetrain::detect {

// ---------------------------------------------------------------- head

int64_t DetectHeadSpec::rows_per_image() const {
  int64_t rows = 0;
  for (int l = 0; l < levels(); ++l) rows += level_rows(l);
  return rows;
}

int64_t DetectHeadSpec::level_offset(int level) const {
  int64_t rows = 0;
  for (int l = 0; l < level; ++l) rows += level_rows(l);
  return rows;
}

void DetectHeadSpec::validate() const {
  HT_CHECK(num_classes >= 1, "detection head: num_classes must be at least 1, got ", num_classes);
  HT_CHECK(anchors_per_level >= 1, "detection head: anchors_per_level must be at least 1, got ", anchors_per_level);
  HT_CHECK(!strides.empty(), "detection head: no levels (strides is empty)");
  HT_CHECK(image_h > 0 && image_w > 0, "detection head: image size must be positive, got ", image_h, "x", image_w);
  for (int l = 0; l < levels(); ++l) {
    const int s = strides[size_t(l)];
    HT_CHECK(s > 0, "detection head: stride of level ", l, " must be positive, got ", s);
    HT_CHECK(image_h % s == 0 && image_w % s == 0, "detection head: image ", image_h, "x", image_w,
             " is not a multiple of level ", l, "'s stride ", s);
  }
  const size_t want = size_t(levels()) * size_t(anchors_per_level) * 2;
  HT_CHECK(anchors.size() == want, "detection head: anchors must hold levels·anchors_per_level·2 = ", want,
           " values (w, h pairs), got ", anchors.size());
  for (size_t i = 0; i < anchors.size(); ++i)
    HT_CHECK(std::isfinite(anchors[i]) && anchors[i] > 0, "detection head: anchor value ", i,
             " must be a positive size in pixels, got ", anchors[i]);
}

DetectHeadSpec yolov5_head(int num_classes, int image_h, int image_w) {
  DetectHeadSpec spec;
  spec.num_classes = num_classes;
  spec.anchors_per_level = 3;
  spec.strides = {8, 16, 32};
  spec.anchors = {10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326};
  spec.image_h = image_h;
  spec.image_w = image_w;
  return spec;
}

// ---------------------------------------------------------------- configuration

std::vector<float> default_balance(int levels) {
  // ComputeLoss: {4, 1, 0.4} for P3–P5, otherwise its P3–P7 list, one weight per level.
  if (levels == 3) return {4.0f, 1.0f, 0.4f};
  HT_CHECK(levels >= 1 && levels <= 5, "YOLO loss: no default objectness balance for ", levels,
           " levels (YOLOv5 has one for 1 to 5); set YoloLossConfig::balance");
  const std::vector<float> p3_p7 = {4.0f, 1.0f, 0.25f, 0.06f, 0.02f};
  return std::vector<float>(p3_p7.begin(), p3_p7.begin() + levels);
}

YoloLossConfig scaled_for(const YoloLossConfig& cfg, const DetectHeadSpec& spec) {
  spec.validate();
  // train.py: YOLOv5's gains were tuned for 3 levels, 80 classes and 640 px; fewer levels carry fewer
  // terms, fewer classes a smaller class loss, a smaller image fewer rows in each objectness mean.
  const double per_level = 3.0 / spec.levels();
  const double area = double(spec.image_h) * spec.image_w / (640.0 * 640.0);
  YoloLossConfig out = cfg;
  out.box_gain = float(cfg.box_gain * per_level);
  out.cls_gain = float(cfg.cls_gain * spec.num_classes / 80.0 * per_level);
  out.obj_gain = float(cfg.obj_gain * area * per_level);
  return out;
}

// ---------------------------------------------------------------- targets

namespace {

void check_targets(const DetectHeadSpec& spec, const data::BoxList& t, int64_t images) {
  HT_CHECK(images >= 0, "YOLO loss: the number of images must be non-negative, got ", images);
  HT_CHECK(t.samples() == images, "YOLO loss: the targets hold boxes of ", t.samples(), " images, the predictions ",
           images);
  if (images == 0) return;
  HT_CHECK(t.offsets.front() == 0, "YOLO loss: target offsets must start at 0, got ", t.offsets.front());
  for (int64_t i = 0; i < images; ++i)
    HT_CHECK(t.count(i) >= 0, "YOLO loss: target offsets decrease at image ", i);
  HT_CHECK(size_t(t.offsets.back()) * data::kBoxFields == t.rows.size(), "YOLO loss: target offsets end at ",
           t.offsets.back(), " boxes but rows hold ", t.rows.size(), " floats (", data::kBoxFields, " per box)");
  for (int64_t i = 0; i < images; ++i) {
    for (int64_t r = t.offsets[i]; r < t.offsets[i + 1]; ++r) {
      const float* b = t.box(r);
      HT_CHECK(b[0] >= 0 && b[0] < spec.num_classes && b[0] == std::floor(b[0]), "YOLO loss: image ", i, " box ", r,
               ": class ", b[0], " is not an integer in [0, ", spec.num_classes, ")");
      for (int k = 1; k < data::kBoxFields; ++k)
        HT_CHECK(b[k] >= 0 && b[k] <= 1, "YOLO loss: image ", i, " box ", r, ": (cx, cy, w, h) = (", b[1], ", ",
                 b[2], ", ", b[3], ", ", b[4], ") is not normalised to [0, 1]");
    }
  }
}

// build_targets' cell offsets, in its order: the centre's cell, then the neighbour left (j), above (k),
// right (l), below (m). A neighbour is used when the centre lies in the half of its cell facing it and
// more than one cell from that border of the grid.
constexpr float kOffsetX[5] = {0.0f, 0.5f, 0.0f, -0.5f, 0.0f};
constexpr float kOffsetY[5] = {0.0f, 0.0f, 0.5f, 0.0f, -0.5f};

struct Candidate {  // a box on one level's grid with one anchor it matches
  float gx, gy, gw, gh;
  int anchor;
  int64_t box, image;
};

// Which of the five cells a centre on a grid of gw × gh uses, all in float as YOLOv5.
void neighbour_flags(float gx, float gy, int grid_w, int grid_h, bool use[5]) {
  const float gxi = float(grid_w) - gx, gyi = float(grid_h) - gy;  // distance from the far borders
  use[0] = true;
  use[1] = std::fmod(gx, 1.0f) < 0.5f && gx > 1.0f;
  use[2] = std::fmod(gy, 1.0f) < 0.5f && gy > 1.0f;
  use[3] = std::fmod(gxi, 1.0f) < 0.5f && gxi > 1.0f;
  use[4] = std::fmod(gyi, 1.0f) < 0.5f && gyi > 1.0f;
}

// The boxes of the batch on level l's grid, paired with each anchor whose w and h ratios are both within
// anchor_t, anchor-major as YOLOv5's targets.repeat(na) orders them.
std::vector<Candidate> anchor_candidates(const DetectHeadSpec& spec, int l, float anchor_t,
                                         const data::BoxList& targets) {
  const float fw = float(spec.grid_w(l)), fh = float(spec.grid_h(l)), stride = float(spec.strides[size_t(l)]);
  std::vector<Candidate> out;
  for (int a = 0; a < spec.anchors_per_level; ++a) {
    const float aw = spec.anchor_w(l, a) / stride, ah = spec.anchor_h(l, a) / stride;  // grid units
    for (int64_t i = 0; i < targets.samples(); ++i) {
      for (int64_t r = targets.offsets[i]; r < targets.offsets[i + 1]; ++r) {
        const float* b = targets.box(r);
        const Candidate c{b[1] * fw, b[2] * fh, b[3] * fw, b[4] * fh, a, r, i};
        const float rw = c.gw / aw, rh = c.gh / ah;
        const float worst = std::max(std::max(rw, 1.0f / rw), std::max(rh, 1.0f / rh));
        if (worst < anchor_t) out.push_back(c);
      }
    }
  }
  return out;
}

TargetMatch make_match(const DetectHeadSpec& spec, int l, const Candidate& c, int o, const data::BoxList& targets) {
  // YOLOv5 truncates (gxy − offset) to a cell and clamps it to the grid in place (gi.clamp_ on a view of
  // gij) before measuring the box from it: a centre on the far border (cx = 1) lands in the last cell with
  // tx = 1.
  TargetMatch m;
  m.image = c.image;
  m.anchor = c.anchor;
  m.gx = int(std::clamp<int64_t>(int64_t(c.gx - kOffsetX[o]), 0, spec.grid_w(l) - 1));
  m.gy = int(std::clamp<int64_t>(int64_t(c.gy - kOffsetY[o]), 0, spec.grid_h(l) - 1));
  m.cls = int(targets.box(c.box)[0]);
  m.tx = c.gx - float(m.gx);
  m.ty = c.gy - float(m.gy);
  m.tw = c.gw;
  m.th = c.gh;
  m.box = c.box;
  return m;
}

}  // namespace

std::vector<std::vector<TargetMatch>> build_targets(const DetectHeadSpec& spec, float anchor_t,
                                                    const data::BoxList& targets, int64_t images) {
  spec.validate();
  check_targets(spec, targets, images);
  std::vector<std::vector<TargetMatch>> levels(size_t(spec.levels()));
  for (int l = 0; l < spec.levels(); ++l) {
    const std::vector<Candidate> cands = anchor_candidates(spec, l, anchor_t, targets);
    std::vector<std::array<bool, 5>> use(cands.size());
    for (size_t k = 0; k < cands.size(); ++k)
      neighbour_flags(cands[k].gx, cands[k].gy, spec.grid_w(l), spec.grid_h(l), use[k].data());
    for (int o = 0; o < 5; ++o)  // offset-major, as t.repeat((5, 1, 1))[j]
      for (size_t k = 0; k < cands.size(); ++k)
        if (use[k][size_t(o)]) levels[size_t(l)].push_back(make_match(spec, l, cands[k], o, targets));
  }
  return levels;
}

// ---------------------------------------------------------------- CIoU

namespace {

constexpr double kEps = 1e-7;  // bbox_iou's eps
const double kV = 4.0 / (M_PI * M_PI);

struct CiouParts {  // bbox_iou's intermediate values, kept for the backward pass
  double p0x, p1x, p0y, p1y, t0x, t1x, t0y, t1y;  // corners: pred (p), target (t)
  double w1, h1, w2, h2;
  double iw_raw, ih_raw, iw, ih, inter, uni, iou;
  double cw, ch, c2, dx, dy, rho2, q, v;
};

CiouParts ciou_parts(const double p[4], const double t[4]) {
  CiouParts c;
  c.w1 = p[2], c.h1 = p[3], c.w2 = t[2], c.h2 = t[3];
  c.p0x = p[0] - c.w1 / 2, c.p1x = p[0] + c.w1 / 2, c.p0y = p[1] - c.h1 / 2, c.p1y = p[1] + c.h1 / 2;
  c.t0x = t[0] - c.w2 / 2, c.t1x = t[0] + c.w2 / 2, c.t0y = t[1] - c.h2 / 2, c.t1y = t[1] + c.h2 / 2;
  c.iw_raw = std::min(c.p1x, c.t1x) - std::max(c.p0x, c.t0x);
  c.ih_raw = std::min(c.p1y, c.t1y) - std::max(c.p0y, c.t0y);
  c.iw = std::max(c.iw_raw, 0.0), c.ih = std::max(c.ih_raw, 0.0);
  c.inter = c.iw * c.ih;
  c.uni = c.w1 * c.h1 + c.w2 * c.h2 - c.inter + kEps;
  c.iou = c.inter / c.uni;
  c.cw = std::max(c.p1x, c.t1x) - std::min(c.p0x, c.t0x);
  c.ch = std::max(c.p1y, c.t1y) - std::min(c.p0y, c.t0y);
  c.c2 = c.cw * c.cw + c.ch * c.ch + kEps;
  c.dx = c.t0x + c.t1x - c.p0x - c.p1x;  // twice the centre distance, as bbox_iou writes it
  c.dy = c.t0y + c.t1y - c.p0y - c.p1y;
  c.rho2 = (c.dx * c.dx + c.dy * c.dy) / 4;
  // atan2(w, h) is atan(w / h) for h > 0, and 0 rather than NaN for a box that collapsed to a point (a
  // row whose σ(tw) and σ(th) rounded to 0, as far-off logits of an early validation give).
  c.q = std::atan2(c.w2, c.h2) - std::atan2(c.w1, c.h1);
  c.v = kV * c.q * c.q;
  return c;
}

double ciou_alpha(const CiouParts& c) { return c.v / (c.v - c.iou + (1 + kEps)); }
double ciou_value(const CiouParts& c, double alpha) { return c.iou - (c.rho2 / c.c2 + c.v * alpha); }

// PyTorch's gradient of minimum/maximum: all to the chosen argument, half to each on a tie.
double pick_lower(double a, double b) { return a < b ? 1.0 : (a == b ? 0.5 : 0.0); }
double pick_higher(double a, double b) { return a > b ? 1.0 : (a == b ? 0.5 : 0.0); }

}  // namespace

Ciou ciou(const double pred[4], const double target[4]) {
  const CiouParts c = ciou_parts(pred, target);
  const double alpha = ciou_alpha(c);
  return {ciou_value(c, alpha), c.iou, alpha};
}

void ciou_backward(const double pred[4], const double target[4], double alpha, double scale, double grad[4]) {
  const CiouParts c = ciou_parts(pred, target);
  // ciou = iou − rho2/c2 − alpha·v, alpha constant; walk back to the pred corners and its w, h.
  const double d_iou = scale, d_rho2 = -scale / c.c2, d_c2 = scale * c.rho2 / (c.c2 * c.c2), d_v = -scale * alpha;
  const double d_uni = -d_iou * c.inter / (c.uni * c.uni);
  const double d_inter = d_iou / c.uni - d_uni;
  // clamp(0) passes the gradient at 0 too (PyTorch's clamp backward is inclusive).
  const double d_iw = c.iw_raw >= 0 ? d_inter * c.ih : 0.0, d_ih = c.ih_raw >= 0 ? d_inter * c.iw : 0.0;
  const double d_cw = d_c2 * 2 * c.cw, d_ch = d_c2 * 2 * c.ch;
  const double d_dx = d_rho2 * c.dx / 2, d_dy = d_rho2 * c.dy / 2;
  const double d_p1x = d_iw * pick_lower(c.p1x, c.t1x) + d_cw * pick_higher(c.p1x, c.t1x) - d_dx;
  const double d_p0x = -d_iw * pick_higher(c.p0x, c.t0x) - d_cw * pick_lower(c.p0x, c.t0x) - d_dx;
  const double d_p1y = d_ih * pick_lower(c.p1y, c.t1y) + d_ch * pick_higher(c.p1y, c.t1y) - d_dy;
  const double d_p0y = -d_ih * pick_higher(c.p0y, c.t0y) - d_ch * pick_lower(c.p0y, c.t0y) - d_dy;
  // v depends on atan(w1/h1): d/dw1 = h1/(w1²+h1²), d/dh1 = −w1/(w1²+h1²); q subtracts it.
  const double r2 = c.w1 * c.w1 + c.h1 * c.h1;
  const double d_q = d_v * 2 * kV * c.q;
  const double d_q_r2 = r2 > 0 ? d_q / r2 : 0.0;  // a point box: no direction to move its ratio
  const double d_w1 = d_uni * c.h1 - d_q_r2 * c.h1, d_h1 = d_uni * c.w1 + d_q_r2 * c.w1;
  grad[0] = d_p0x + d_p1x;
  grad[1] = d_p0y + d_p1y;
  grad[2] = d_w1 + (d_p1x - d_p0x) / 2;
  grad[3] = d_h1 + (d_p1y - d_p0y) / 2;
}

// ---------------------------------------------------------------- loss

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// BCE with logits, PyTorch's stable form.
double bce_logits(double x, double t) { return (1 - t) * x + std::log1p(std::exp(-std::abs(x))) + std::max(-x, 0.0); }

// The predicted box of a row in grid units relative to its cell: YOLOv5's pxy = 2σ − 0.5,
// pwh = (2σ)²·anchor.
void predicted_box(const float* row, double aw, double ah, double box[4]) {
  box[0] = 2 * sigmoid(row[0]) - 0.5;
  box[1] = 2 * sigmoid(row[1]) - 0.5;
  const double sw = 2 * sigmoid(row[2]), sh = 2 * sigmoid(row[3]);
  box[2] = sw * sw * aw;
  box[3] = sh * sh * ah;
}

// d box / d logits for the chain rule of predicted_box.
void predicted_box_jacobian(const float* row, double aw, double ah, double jac[4]) {
  const double sx = sigmoid(row[0]), sy = sigmoid(row[1]), sw = sigmoid(row[2]), sh = sigmoid(row[3]);
  jac[0] = 2 * sx * (1 - sx);
  jac[1] = 2 * sy * (1 - sy);
  jac[2] = 8 * aw * sw * sw * (1 - sw);
  jac[3] = 8 * ah * sh * sh * (1 - sh);
}

// What the loss reads of one batch: the head, the gains, the logits and the matches of every level.
struct Batch {
  const DetectHeadSpec& spec;
  const YoloLossConfig& cfg;
  const float* pred;  // [N, A, no]
  int64_t N;
  const std::vector<std::vector<TargetMatch>>& matches;

  int64_t row_of(int l, const TargetMatch& m) const {
    return m.image * spec.rows_per_image() + spec.row(l, m.anchor, m.gy, m.gx);
  }
  // The anchor in grid units, divided in float as YOLOv5 divides its anchors by the strides.
  void anchor_grid(int l, int a, double& aw, double& ah) const {
    aw = spec.anchor_w(l, a) / float(spec.strides[size_t(l)]);
    ah = spec.anchor_h(l, a) / float(spec.strides[size_t(l)]);
  }
  // label smoothing as smooth_BCE: positive and negative class targets.
  double class_target(int c, int cls) const {
    return c == cls ? 1.0 - 0.5 * cfg.label_smoothing : 0.5 * cfg.label_smoothing;
  }
};

struct LevelSums {  // one level's sums over its matches, before the means
  double box = 0, cls = 0;
};

// Box and class terms of every match, in order. Records (or, when `fixed`, reads) each match's alpha and
// sets the objectness target of its row to its CIoU clamped at 0: with repeated rows the last match wins,
// as tobj[b, a, gj, gi] = iou does.
std::vector<LevelSums> match_terms(const Batch& B, YoloLoss::Detached& det, bool fixed) {
  const int nc = B.spec.num_classes;
  std::vector<LevelSums> sums(B.matches.size());
  size_t k = 0;
  for (size_t l = 0; l < B.matches.size(); ++l) {
    for (const TargetMatch& m : B.matches[l]) {
      const int64_t r = B.row_of(int(l), m);
      const float* row = B.pred + r * B.spec.outputs();
      double aw, ah, pbox[4];
      B.anchor_grid(int(l), m.anchor, aw, ah);
      predicted_box(row, aw, ah, pbox);
      const double tbox[4] = {m.tx, m.ty, m.tw, m.th};
      const CiouParts parts = ciou_parts(pbox, tbox);
      if (!fixed) det.alpha[k] = ciou_alpha(parts);
      const double value = ciou_value(parts, det.alpha[k]);
      sums[l].box += 1.0 - value;
      if (!fixed) det.tobj[size_t(r)] = std::max(value, 0.0);
      if (nc > 1)  // YOLOv5 trains no class scores for a single class
        for (int c = 0; c < nc; ++c) sums[l].cls += bce_logits(row[5 + c], B.class_target(c, m.cls));
      ++k;
    }
  }
  return sums;
}

// Objectness BCE summed over every row of each level (its mean is taken by the caller). With dpred, every
// row of it is overwritten: zero but for the objectness gradient. Partial sums per (image, level) sit in
// fixed slots and are added in a fixed order, so the result does not depend on the number of threads.
std::vector<double> objectness_sums(const Batch& B, const std::vector<double>& tobj, float* dpred, float grad_scale) {
  const DetectHeadSpec& s = B.spec;
  const int L = s.levels(), no = s.outputs();
  const int64_t A = s.rows_per_image(), N = B.N;
  std::vector<double> scale(B.matches.size());  // d total / d BCE of one row
  for (int l = 0; l < L; ++l)
    scale[size_t(l)] = double(grad_scale) * B.cfg.obj_gain * B.cfg.balance[size_t(l)] / double(N * s.level_rows(l));
  std::vector<double> part(size_t(N * L), 0.0);
#pragma omp parallel for schedule(static) if (N * A > (1 << 14))
  for (int64_t b = 0; b < N; ++b) {
    for (int l = 0; l < L; ++l) {
      const int64_t begin = b * A + s.level_offset(l), end = begin + s.level_rows(l);
      double sum = 0;
      for (int64_t r = begin; r < end; ++r) {
        const double x = B.pred[r * no + 4], t = tobj[size_t(r)];
        sum += bce_logits(x, t);
        if (dpred) {
          float* d = dpred + r * no;
          std::fill(d, d + no, 0.0f);
          d[4] = float(scale[size_t(l)] * (sigmoid(x) - t));
        }
      }
      part[size_t(b * L + l)] = sum;
    }
  }
  std::vector<double> sums(size_t(L), 0.0);
  for (int l = 0; l < L; ++l)
    for (int64_t b = 0; b < N; ++b) sums[size_t(l)] += part[size_t(b * L + l)];
  return sums;
}

// Adds the box and class gradients of every match to dpred (a row matched twice gets both). norm[l]: what
// level l's means divide by.
void add_match_gradients(const Batch& B, const std::vector<double>& alpha, const std::vector<double>& norm,
                         float* dpred, float grad_scale) {
  const int nc = B.spec.num_classes, no = B.spec.outputs();
  size_t k = 0;
  for (size_t l = 0; l < B.matches.size(); ++l) {
    const double n = norm[l];
    const double box_scale = -double(grad_scale) * B.cfg.box_gain / n;  // d total / d ciou of one match
    const double cls_scale = double(grad_scale) * B.cfg.cls_gain / (n * nc);
    for (const TargetMatch& m : B.matches[l]) {
      const int64_t r = B.row_of(int(l), m);
      const float* row = B.pred + r * no;
      float* d = dpred + r * no;
      double aw, ah, pbox[4], g[4], jac[4];
      B.anchor_grid(int(l), m.anchor, aw, ah);
      predicted_box(row, aw, ah, pbox);
      predicted_box_jacobian(row, aw, ah, jac);
      const double tbox[4] = {m.tx, m.ty, m.tw, m.th};
      ciou_backward(pbox, tbox, alpha[k], box_scale, g);
      for (int i = 0; i < 4; ++i) d[i] = float(double(d[i]) + g[i] * jac[i]);
      if (nc > 1)
        for (int c = 0; c < nc; ++c)
          d[5 + c] = float(double(d[5 + c]) + cls_scale * (sigmoid(row[5 + c]) - B.class_target(c, m.cls)));
      ++k;
    }
  }
}

}  // namespace

YoloLoss::YoloLoss(DetectHeadSpec spec, YoloLossConfig cfg) : spec_(std::move(spec)), cfg_(std::move(cfg)) {
  spec_.validate();
  if (cfg_.balance.empty()) cfg_.balance = default_balance(spec_.levels());
  HT_CHECK(int(cfg_.balance.size()) == spec_.levels(), "YOLO loss: balance has ", cfg_.balance.size(),
           " weights for a head of ", spec_.levels(), " levels");
  HT_CHECK(cfg_.anchor_t > 1, "YOLO loss: anchor_t must be above 1, got ", cfg_.anchor_t);
  HT_CHECK(cfg_.label_smoothing >= 0 && cfg_.label_smoothing <= 1, "YOLO loss: label_smoothing must be in [0, 1], got ",
           cfg_.label_smoothing);
}

YoloLoss::Result YoloLoss::compute(const float* pred, int64_t N, const data::BoxList& targets, float* dpred,
                                   float grad_scale, Detached* detached, const std::vector<double>& match_norm) const {
  Detached local;
  return evaluate(pred, N, targets, dpred, grad_scale, detached ? *detached : local, false, match_norm);
}

YoloLoss::Result YoloLoss::compute_fixed(const float* pred, int64_t N, const data::BoxList& targets,
                                         const Detached& fixed, const std::vector<double>& match_norm) const {
  Detached copy = fixed;
  return evaluate(pred, N, targets, nullptr, 0.0f, copy, true, match_norm);
}

std::vector<int64_t> YoloLoss::level_matches(const data::BoxList& targets, int64_t N) const {
  std::vector<int64_t> counts;
  for (const auto& m : build_targets(spec_, cfg_.anchor_t, targets, N)) counts.push_back(int64_t(m.size()));
  return counts;
}

YoloLoss::Result YoloLoss::evaluate(const float* pred, int64_t N, const data::BoxList& targets, float* dpred,
                                    float grad_scale, Detached& det, bool fixed,
                                    const std::vector<double>& match_norm) const {
  const auto matches = build_targets(spec_, cfg_.anchor_t, targets, N);  // checks N and targets
  Result res;
  if (N == 0) return res;
  HT_CHECK(pred != nullptr, "YOLO loss: pred is null for ", N, " images");
  HT_CHECK(match_norm.empty() || match_norm.size() == matches.size(), "YOLO loss: ", match_norm.size(),
           " match counts for a head of ", matches.size(), " levels");
  std::vector<double> norm(matches.size());
  for (size_t l = 0; l < matches.size(); ++l) {
    norm[l] = match_norm.empty() ? double(matches[l].size()) : match_norm[l];
    HT_CHECK(matches[l].empty() || norm[l] > 0, "YOLO loss: level ", l, " has ", matches[l].size(),
             " matches but its means divide by ", norm[l]);
  }
  for (const auto& m : matches) res.matched += int64_t(m.size());
  const int64_t rows = N * spec_.rows_per_image();
  if (fixed) {
    HT_CHECK(int64_t(det.alpha.size()) == res.matched && int64_t(det.tobj.size()) == rows,
             "YOLO loss: the fixed detached values do not fit this batch");
  } else {
    det.alpha.assign(size_t(res.matched), 0.0);
    det.tobj.assign(size_t(rows), 0.0);
  }
  const Batch batch{spec_, cfg_, pred, N, matches};
  const std::vector<LevelSums> sums = match_terms(batch, det, fixed);
  const std::vector<double> obj = objectness_sums(batch, det.tobj, dpred, grad_scale);
  // ComputeLoss: per level, box and class terms are means over its matches, objectness a mean over all
  // its rows weighted by balance; the levels add up.
  for (int l = 0; l < spec_.levels(); ++l) {
    const double n = norm[size_t(l)];
    if (!matches[size_t(l)].empty()) {
      res.box += sums[size_t(l)].box / n;
      res.cls += sums[size_t(l)].cls / (n * spec_.num_classes);
    }
    res.obj += cfg_.balance[size_t(l)] * obj[size_t(l)] / double(N * spec_.level_rows(l));
  }
  res.box *= cfg_.box_gain;
  res.obj *= cfg_.obj_gain;
  res.cls *= cfg_.cls_gain;
  res.total = res.box + res.obj + res.cls;
  res.total_batch = res.total * double(N);
  if (dpred) add_match_gradients(batch, det.alpha, norm, dpred, grad_scale);
  return res;
}

}  // namespace hetrain::detect
