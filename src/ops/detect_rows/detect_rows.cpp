// ops/detect_rows/detect_rows.cpp — the Detect head's layout change on the CPU, and its Tensor-level entry points.
#include "ops/detect_rows/detect_rows.hpp"

#include "ops/common/for_slices.hpp"

namespace hetrain::ops {

Dispatch<DetectRowsFn> detect_rows_forward_impl("detect_rows_forward");
Dispatch<DetectRowsFn> detect_rows_backward_impl("detect_rows_backward");

// A transpose per (sample, anchor): [no, H·W] planes to [H·W, no] rows. Each loop runs over its output's
// contiguous units (rows of out, planes of dx), one writer each.
template <typename T>
void detect_rows_forward_cpu(T* out, const T* x, const DetectRowsGeom& g) {
  const int64_t HW = g.H * g.W, no = g.fields, level_rows = g.N * g.anchors * HW;
#pragma omp parallel for schedule(static) if (level_rows * no > cpu::kSliceParallelMin)
  for (int64_t r = 0; r < level_rows; ++r) {
    const int64_t p = r % HW, sa = r / HW, n = sa / g.anchors, a = sa % g.anchors;
    T* o = out + (n * g.rows + g.row_offset + a * HW + p) * no;
    const T* xp = x + sa * no * HW + p;
    for (int64_t f = 0; f < no; ++f) o[f] = xp[f * HW];
  }
}

template <typename T>
void detect_rows_backward_cpu(T* dx, const T* dout, const DetectRowsGeom& g) {
  const int64_t HW = g.H * g.W, no = g.fields, planes = g.N * g.anchors * no;
#pragma omp parallel for schedule(static) if (planes * HW > cpu::kSliceParallelMin)
  for (int64_t q = 0; q < planes; ++q) {
    const int64_t f = q % no, sa = q / no, n = sa / g.anchors, a = sa % g.anchors;
    const T* d = dout + (n * g.rows + g.row_offset + a * HW) * no + f;
    T* dxq = dx + q * HW;
    for (int64_t p = 0; p < HW; ++p) dxq[p] = d[p * no];
  }
}

template void detect_rows_forward_cpu<float>(float*, const float*, const DetectRowsGeom&);
template void detect_rows_forward_cpu<double>(double*, const double*, const DetectRowsGeom&);
template void detect_rows_backward_cpu<float>(float*, const float*, const DetectRowsGeom&);
template void detect_rows_backward_cpu<double>(double*, const double*, const DetectRowsGeom&);

HT_OP_IMPLEMENTATION(detect_rows_forward_impl, Device::CPU, detect_rows_forward_cpu<float>);
HT_OP_IMPLEMENTATION(detect_rows_backward_impl, Device::CPU, detect_rows_backward_cpu<float>);

namespace {
// Checks a level's map [N, na·no, H, W] against the rows tensor [N, A, no] and returns the geometry.
DetectRowsGeom check_detect_rows(const char* op, const Tensor& rows, const char* rows_what, int64_t row_offset,
                                 const Tensor& map, const char* map_what, int64_t na) {
  HT_CHECK(na >= 1, op, ": na (anchors) must be at least 1, got ", na);
  HT_CHECK(map.ndim() == 4, op, ": ", map_what, " must be 4-D [N, na·no, H, W], got ", shape_str(map.shape()));
  HT_CHECK(map.dim(1) >= na && map.dim(1) % na == 0, op, ": ", map_what, " has ", map.dim(1),
           " channels, not a positive multiple of na = ", na);
  HT_CHECK(rows.ndim() == 3, op, ": ", rows_what, " must be 3-D [N, A, no], got ", shape_str(rows.shape()));
  DetectRowsGeom g;
  g.N = map.dim(0), g.anchors = na, g.fields = map.dim(1) / na, g.H = map.dim(2), g.W = map.dim(3);
  g.rows = rows.dim(1), g.row_offset = row_offset;
  check_shape(op, rows_what, rows, {g.N, g.rows, g.fields});
  const int64_t level_rows = na * g.H * g.W;
  HT_CHECK(row_offset >= 0 && row_offset + level_rows <= g.rows, op, ": this level's rows [", row_offset, ", ",
           row_offset + level_rows, ") do not fit the ", g.rows, " rows of ", rows_what);
  common_device(op, {&rows, &map});
  return g;
}
}  // namespace

void detect_rows_forward(const Tensor& out, int64_t row_offset, const Tensor& x, int64_t na) {
  const DetectRowsGeom g = check_detect_rows("detect_rows_forward", out, "output", row_offset, x, "input", na);
  detect_rows_forward_impl.on(x.device())(out.data(), x.data(), g);
}

void detect_rows_backward(const Tensor& dx, const Tensor& dout, int64_t row_offset, int64_t na) {
  const DetectRowsGeom g =
      check_detect_rows("detect_rows_backward", dout, "output gradient", row_offset, dx, "input gradient", na);
  detect_rows_backward_impl.on(dx.device())(dx.data(), dout.data(), g);
}

}  // namespace hetrain::ops
