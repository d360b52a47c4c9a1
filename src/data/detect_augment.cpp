// YOLOv5's training augmentations of detection samples, written from its documented recipe
// (docs/detection.md, "Augmentation"): a mosaic of 4 images around a random centre of a 2H × 2W canvas,
// a random affine (zoom and shift) onto the H × W output with a grey (114) border, HSV gains, a
// left-right flip. Boxes move with the pixels. Every draw of a sample, its mosaic partners included, comes
// from Rng(aug_seed, its dataset index) (draw_detection): the composed sample depends on neither the rank,
// nor the batch, nor the thread that makes it, so invariant 4 holds with every augmentation on.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
constexpr uint64_t kDetectStream = 0x6D6F736169637331ull;  // keeps these draws apart from crop_flip's
constexpr uint8_t kBorder = 114;                            // YOLOv5's grey fill

void check_range(float v, float lo, float hi, bool hi_open, const char* option, const char* what) {
  const bool ok = std::isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi);
  HT_CHECK(ok, "--", option, " must be ", what, ", got ", v);
}
}  // namespace

void DetectAugment::check() const {
  check_range(mosaic, 0, 1, false, "mosaic", "a probability in [0, 1]");
  check_range(scale, 0, 1, true, "affine-scale", "in [0, 1) (the zoom is 1 ± it)");
  check_range(translate, 0, 0.5f, false, "affine-translate", "in [0, 0.5] (a fraction of the image)");
  check_range(hsv_h, 0, 1, false, "hsv-h", "a gain range in [0, 1]");
  check_range(hsv_s, 0, 1, false, "hsv-s", "a gain range in [0, 1]");
  check_range(hsv_v, 0, 1, false, "hsv-v", "a gain range in [0, 1]");
  check_range(fliplr, 0, 1, false, "fliplr", "a probability in [0, 1]");
}

std::string DetectAugment::describe() const {
  std::ostringstream o;
  o << "mosaic " << mosaic << ", scale ±" << scale << ", translate ±" << translate << ", HSV gains ±" << hsv_h
    << "/" << hsv_s << "/" << hsv_v << ", left-right flip " << fliplr;
  return o.str();
}

DetectDraw draw_detection(const DetectAugment& a, uint64_t aug_seed, int64_t index, int64_t num_samples, int height,
                          int width) {
  HT_CHECK(num_samples > 0, "draw_detection: no samples to draw mosaic partners from");
  Rng rng(aug_seed ^ kDetectStream, uint64_t(index));
  // Fixed order, every value drawn: an augmentation turned off does not move the others' draws.
  const double u_mosaic = rng.uniform();
  int64_t partners[3];
  for (int64_t& p : partners) p = int64_t(rng.below(uint64_t(num_samples)));
  const double u_cx = rng.uniform(), u_cy = rng.uniform();
  const double u_zoom = rng.uniform(), u_sx = rng.uniform(), u_sy = rng.uniform();
  double u_gain[3];
  for (double& u : u_gain) u = rng.uniform();
  const double u_flip = rng.uniform();

  DetectDraw d;
  d.mosaic = u_mosaic < a.mosaic;
  if (d.mosaic) {
    std::copy(partners, partners + 3, d.partners);
    d.centre_x = std::floor(width / 2.0 + u_cx * width);  // whole pixels: the 4 images are placed exactly
    d.centre_y = std::floor(height / 2.0 + u_cy * height);
  }
  d.zoom = 1.0 - a.scale + 2.0 * a.scale * u_zoom;
  d.shift_x = a.translate * (2.0 * u_sx - 1.0);
  d.shift_y = a.translate * (2.0 * u_sy - 1.0);
  const float g[3] = {a.hsv_h, a.hsv_s, a.hsv_v};
  for (int k = 0; k < 3; ++k) d.gain[k] = 1.0 + g[k] * (2.0 * u_gain[k] - 1.0);
  d.flip = u_flip < a.fliplr;
  return d;
}

DetectReads plan_detection_reads(const DetectAugment& a, uint64_t aug_seed, const std::vector<int64_t>& indices,
                                 int64_t num_samples, int height, int width) {
  DetectReads plan;
  plan.read = indices;
  plan.first_partner.assign(indices.size(), -1);
  if (a.mosaic <= 0) return plan;
  for (size_t i = 0; i < indices.size(); ++i) {
    const DetectDraw d = draw_detection(a, aug_seed, indices[i], num_samples, height, width);
    if (!d.mosaic) continue;
    plan.first_partner[i] = int64_t(plan.read.size());
    plan.read.insert(plan.read.end(), d.partners, d.partners + 3);
  }
  return plan;
}

namespace {
// One source image of a composition: its pixels (C × H × W), its boxes (rows of 5, normalised), and where
// its top-left corner lands on the canvas.
struct Part {
  const uint8_t* image;
  const float* boxes;
  int64_t count;
  int x0, y0;
};

struct PixelBox {
  float cls;
  double x1, y1, x2, y2;
};

// A box kept after the affine, as YOLOv5 keeps them: over 2 pixels wide and high, over 10 % of its area
// before the affine and clipping (scaled by the zoom), aspect ratio under 100.
bool keep_box(const PixelBox& before, const PixelBox& after, double zoom) {
  const double w0 = (before.x2 - before.x1) * zoom, h0 = (before.y2 - before.y1) * zoom;
  const double w1 = after.x2 - after.x1, h1 = after.y2 - after.y1;
  const double eps = 1e-16;
  return w1 > 2 && h1 > 2 && w1 * h1 / (w0 * h0 + eps) > 0.1 && std::max(w1 / (h1 + eps), h1 / (w1 + eps)) < 100;
}

// RGB ↔ 8-bit HSV as OpenCV defines it (H in [0, 180) in steps of 2 degrees, S and V in [0, 255]), in
// integers and single floats (divisions of whole numbers, so rounding ties stay exact): this runs per pixel.
void rgb_to_hsv(int r, int g, int b, int& h, int& s, int& v) {
  const int mx = std::max({r, g, b}), mn = std::min({r, g, b}), diff = mx - mn;
  v = mx;
  if (diff == 0) {
    h = s = 0;
    return;
  }
  s = (510 * diff + mx) / (2 * mx);  // 255·diff/mx, rounded
  // Half the hue in degrees: 30·x/diff from the sector's start (0, 60 or 120).
  const float half = mx == r ? float(30 * (g - b)) / float(diff)
                             : (mx == g ? 60.0f + float(30 * (b - r)) / float(diff)
                                        : 120.0f + float(30 * (r - g)) / float(diff));
  h = int(half < 0 ? half + 180.5f : half + 0.5f);
  if (h >= 180) h -= 180;
}

void hsv_to_rgb(int h, int s, int v, uint8_t& r, uint8_t& g, uint8_t& b) {
  const float H = float(h) / 30.0f, S = float(s) / 255.0f, V = float(v);  // H in [0, 6): the sector
  const int sector = int(H);
  const float f = H - float(sector);
  const float p = V * (1 - S), q = V * (1 - S * f), t = V * (1 - S * (1 - f));
  float rgb[3];
  switch (sector) {
    case 0: rgb[0] = V, rgb[1] = t, rgb[2] = p; break;
    case 1: rgb[0] = q, rgb[1] = V, rgb[2] = p; break;
    case 2: rgb[0] = p, rgb[1] = V, rgb[2] = t; break;
    case 3: rgb[0] = p, rgb[1] = q, rgb[2] = V; break;
    case 4: rgb[0] = t, rgb[1] = p, rgb[2] = V; break;
    default: rgb[0] = V, rgb[1] = p, rgb[2] = q; break;
  }
  r = uint8_t(rgb[0] + 0.5f);
  g = uint8_t(rgb[1] + 0.5f);
  b = uint8_t(rgb[2] + 0.5f);
}

// YOLOv5's HSV step: the hue scaled modulo 180, saturation and value scaled and clipped, through lookup
// tables. A one-channel image has only a value (its hue and saturation are 0): it gets the value gain.
void apply_hsv(uint8_t* img, int C, int H, int W, const double gain[3]) {
  uint8_t lut[3][256];
  for (int x = 0; x < 256; ++x) {
    lut[0][x] = uint8_t(std::fmod(x * gain[0], 180.0));
    lut[1][x] = uint8_t(std::clamp(x * gain[1], 0.0, 255.0));
    lut[2][x] = uint8_t(std::clamp(x * gain[2], 0.0, 255.0));
  }
  const size_t plane = size_t(H) * W;
  if (C == 1) {
    for (size_t i = 0; i < plane; ++i) img[i] = lut[2][img[i]];
    return;
  }
  if (C != 3) return;  // no colour model for other channel counts: left as they are (docs/detection.md)
  uint8_t *R = img, *G = img + plane, *B = img + 2 * plane;
  for (size_t i = 0; i < plane; ++i) {
    int h, s, v;
    rgb_to_hsv(R[i], G[i], B[i], h, s, v);
    hsv_to_rgb(lut[0][h], lut[1][s], lut[2][v], R[i], G[i], B[i]);
  }
}

// The mosaic canvas (2H × 2W, grey where no image lands) with the 4 parts placed at their corners.
void fill_canvas(const Part* parts, int C, int H, int W, std::vector<uint8_t>& canvas) {
  const int CH = 2 * H, CW = 2 * W;
  canvas.assign(size_t(C) * CH * CW, kBorder);
  for (int q = 0; q < 4; ++q) {
    const Part& p = parts[q];
    const int x_begin = std::max(0, p.x0), x_end = std::min(CW, p.x0 + W);
    const int y_begin = std::max(0, p.y0), y_end = std::min(CH, p.y0 + H);
    if (x_end <= x_begin) continue;
    for (int c = 0; c < C; ++c)
      for (int y = y_begin; y < y_end; ++y)
        std::copy_n(p.image + (size_t(c) * H + (y - p.y0)) * W + (x_begin - p.x0), x_end - x_begin,
                    canvas.data() + (size_t(c) * CH + y) * CW + x_begin);
  }
}

// out (C × H × W) = the canvas (C × CH × CW) under x_out = zoom·(x − CW/2) + (1/2 + shift_x)·W (and the same
// in y), sampled bilinearly at pixel indices as cv2.warpAffine does, grey outside the canvas.
void warp(const uint8_t* canvas, int C, int CH, int CW, const DetectDraw& d, int H, int W, uint8_t* out) {
  const double tx = (0.5 + d.shift_x) * W, ty = (0.5 + d.shift_y) * H;
  std::vector<int> xs(W);
  std::vector<float> fx(W);
  for (int x = 0; x < W; ++x) {
    const double u = (x - tx) / d.zoom + CW / 2.0;
    xs[x] = int(std::floor(u));
    fx[x] = float(u - xs[x]);
  }
  auto at = [&](const uint8_t* plane, int y, int x) -> float {
    return (y < 0 || y >= CH || x < 0 || x >= CW) ? float(kBorder) : float(plane[size_t(y) * CW + x]);
  };
  // Output columns whose 2 × 2 source pixels all lie inside the canvas: [inside_begin, inside_end), a range
  // because the map is increasing in x. Rows with both source rows inside read those columns unchecked.
  int inside_begin = W, inside_end = W;
  for (int x = 0; x < W; ++x)
    if (xs[x] >= 0 && xs[x] + 1 < CW) {
      if (inside_begin == W) inside_begin = x;
      inside_end = x + 1;
    }
  for (int c = 0; c < C; ++c) {
    const uint8_t* plane = canvas + size_t(c) * CH * CW;
    for (int y = 0; y < H; ++y) {
      const double v = (y - ty) / d.zoom + CH / 2.0;
      const int y0 = int(std::floor(v));
      const float fy = float(v - y0);
      uint8_t* row = out + (size_t(c) * H + y) * W;
      auto blend = [&](int x, float p00, float p01, float p10, float p11) {
        const float top = p00 * (1 - fx[x]) + p01 * fx[x], bottom = p10 * (1 - fx[x]) + p11 * fx[x];
        row[x] = uint8_t(std::min(255.0f, top * (1 - fy) + bottom * fy + 0.5f));
      };
      const bool rows_inside = y0 >= 0 && y0 + 1 < CH;
      const int fast_begin = rows_inside ? inside_begin : W, fast_end = rows_inside ? inside_end : W;
      for (int x = 0; x < W; ++x) {
        const int x0 = xs[x];
        if (x >= fast_begin && x < fast_end) {
          const uint8_t* p = plane + size_t(y0) * CW + x0;
          blend(x, p[0], p[1], p[CW], p[CW + 1]);
        } else {
          blend(x, at(plane, y0, x0), at(plane, y0, x0 + 1), at(plane, y0 + 1, x0), at(plane, y0 + 1, x0 + 1));
        }
      }
    }
  }
}

void compose_one(const DetectDraw& d, const Part* parts, int num_parts, int C, int H, int W,
                 std::vector<uint8_t>& canvas, uint8_t* out, std::vector<float>& out_boxes) {
  const int CH = num_parts == 4 ? 2 * H : H, CW = num_parts == 4 ? 2 * W : W;
  // The boxes on the canvas, in pixels (a mosaic's clipped to the canvas, as YOLOv5 clips them).
  std::vector<PixelBox> boxes;
  for (int q = 0; q < num_parts; ++q)
    for (int64_t r = 0; r < parts[q].count; ++r) {
      const float* b = parts[q].boxes + r * kBoxFields;
      const double bw = double(b[3]) * W, bh = double(b[4]) * H;
      const double x1 = double(b[1]) * W - bw / 2 + parts[q].x0, y1 = double(b[2]) * H - bh / 2 + parts[q].y0;
      boxes.push_back({b[0], std::clamp(x1, 0.0, double(CW)), std::clamp(y1, 0.0, double(CH)),
                       std::clamp(x1 + bw, 0.0, double(CW)), std::clamp(y1 + bh, 0.0, double(CH))});
    }
  const uint8_t* source = parts[0].image;
  if (num_parts == 4) {
    fill_canvas(parts, C, H, W, canvas);
    source = canvas.data();
  }
  const bool identity = num_parts == 1 && d.zoom == 1 && d.shift_x == 0 && d.shift_y == 0;
  if (identity)
    std::copy_n(source, size_t(C) * H * W, out);
  else
    warp(source, C, CH, CW, d, H, W, out);
  const double tx = (0.5 + d.shift_x) * W, ty = (0.5 + d.shift_y) * H;
  for (const PixelBox& b : boxes) {
    PixelBox m{b.cls, d.zoom * (b.x1 - CW / 2.0) + tx, d.zoom * (b.y1 - CH / 2.0) + ty,
               d.zoom * (b.x2 - CW / 2.0) + tx, d.zoom * (b.y2 - CH / 2.0) + ty};
    m.x1 = std::clamp(m.x1, 0.0, double(W));
    m.x2 = std::clamp(m.x2, 0.0, double(W));
    m.y1 = std::clamp(m.y1, 0.0, double(H));
    m.y2 = std::clamp(m.y2, 0.0, double(H));
    if (!keep_box(b, m, d.zoom)) continue;
    double x1 = m.x1, x2 = m.x2;
    if (d.flip) {
      x1 = W - m.x2;
      x2 = W - m.x1;
    }
    const float row[kBoxFields] = {m.cls, float((x1 + x2) / 2 / W), float((m.y1 + m.y2) / 2 / H),
                                   float((x2 - x1) / W), float((m.y2 - m.y1) / H)};
    out_boxes.insert(out_boxes.end(), row, row + kBoxFields);
  }
  if (d.gain[0] != 1 || d.gain[1] != 1 || d.gain[2] != 1) apply_hsv(out, C, H, W, d.gain);
  if (d.flip)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y) {
        uint8_t* row = out + (size_t(c) * H + y) * W;
        std::reverse(row, row + W);
      }
}
}  // namespace

void augment_detection_batch(const DetectAugment& a, uint64_t aug_seed, const std::vector<int64_t>& indices,
                             const DetectReads& plan, const uint8_t* images, const BoxList& boxes,
                             const DatasetInfo& info, uint8_t* out, BoxList& out_boxes, int threads) {
  const int64_t n = int64_t(indices.size());
  const int C = info.channels, H = info.height, W = info.width;
  const int64_t sb = info.sample_bytes();
  HT_CHECK(boxes.samples() == int64_t(plan.read.size()), "augment_detection_batch: ", boxes.samples(),
           " samples' boxes for ", plan.read.size(), " read");
  auto part_at = [&](int64_t pos, int x0, int y0) {
    const int64_t first = boxes.offsets[pos];
    return Part{images + pos * sb, boxes.rows.data() + first * kBoxFields, boxes.count(pos), x0, y0};
  };
  std::vector<std::vector<float>> sample_boxes(size_t(std::max<int64_t>(n, 0)));
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> canvas;
    for (int64_t i = begin; i < end; ++i) {
      const DetectDraw d = draw_detection(a, aug_seed, indices[size_t(i)], info.num_samples, H, W);
      Part parts[4];
      int num_parts = 1;
      if (plan.first_partner[size_t(i)] >= 0) {
        // Quadrants around the centre: this sample top-left, its partners top-right, bottom-left, bottom-right.
        const int xc = int(d.centre_x), yc = int(d.centre_y);
        const int64_t p = plan.first_partner[size_t(i)];
        parts[0] = part_at(i, xc - W, yc - H);
        parts[1] = part_at(p, xc, yc - H);
        parts[2] = part_at(p + 1, xc - W, yc);
        parts[3] = part_at(p + 2, xc, yc);
        num_parts = 4;
      } else {
        parts[0] = part_at(i, 0, 0);
      }
      compose_one(d, parts, num_parts, C, H, W, canvas, out + i * sb, sample_boxes[size_t(i)]);
    }
  };
  const int t = int(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  if (t == 1) {
    work(0, n);
  } else {
    std::vector<std::thread> pool;
    for (int k = 1; k < t; ++k) pool.emplace_back(work, n * k / t, n * (k + 1) / t);
    work(0, n / t);
    for (auto& th : pool) th.join();
  }
  out_boxes = BoxList();
  out_boxes.offsets.assign(1, 0);
  for (const auto& b : sample_boxes) {
    out_boxes.rows.insert(out_boxes.rows.end(), b.begin(), b.end());
    out_boxes.offsets.push_back(int64_t(out_boxes.rows.size() / kBoxFields));
  }
}

}  // namespace hetrain::data
