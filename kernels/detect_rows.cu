// kernels/detect_rows.cu — the CUDA twins of ops/detect_rows/detect_rows.cpp (grid-stride loops,
// legacy default stream).
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "ops/detect_rows/detect_rows.hpp"

namespace hetrain::ops {
namespace {
using cuda::grid_for;
using cuda::kBlock;

// Both kernels walk their destination in memory order, so the writes coalesce and the reads stride.
// i over this level's rows of out: i = ((n·na + a)·HW + p)·no + f.
__global__ void detect_rows_kernel(float* out, const float* x, int64_t n_elems, DetectRowsGeom g) {
  const int64_t HW = g.H * g.W, no = g.fields, level_rows = g.anchors * HW;
  HT_GRID_STRIDE(i, n_elems) {
    const int64_t f = i % no, r = i / no, n = r / level_rows, ap = r % level_rows, a = ap / HW, p = ap % HW;
    out[(n * g.rows + g.row_offset + ap) * no + f] = x[((n * g.anchors + a) * no + f) * HW + p];
  }
}
// i over dx: i = ((n·na + a)·no + f)·HW + p.
__global__ void detect_rows_backward_kernel(float* dx, const float* dout, int64_t n_elems, DetectRowsGeom g) {
  const int64_t HW = g.H * g.W, no = g.fields;
  HT_GRID_STRIDE(i, n_elems) {
    const int64_t p = i % HW, q = i / HW, f = q % no, sa = q / no, n = sa / g.anchors, a = sa % g.anchors;
    dx[i] = dout[(n * g.rows + g.row_offset + a * HW + p) * no + f];
  }
}

void detect_rows_forward_cuda(float* out, const float* x, const DetectRowsGeom& g) {
  const int64_t n = g.N * g.anchors * g.fields * g.H * g.W;
  if (n == 0) return;
  detect_rows_kernel<<<grid_for(n), kBlock>>>(out, x, n, g);
  HT_CUDA_CHECK_LAUNCH("detect_rows_forward");
}
void detect_rows_backward_cuda(float* dx, const float* dout, const DetectRowsGeom& g) {
  const int64_t n = g.N * g.anchors * g.fields * g.H * g.W;
  if (n == 0) return;
  detect_rows_backward_kernel<<<grid_for(n), kBlock>>>(dx, dout, n, g);
  HT_CUDA_CHECK_LAUNCH("detect_rows_backward");
}
}  // namespace

HT_OP_IMPLEMENTATION(detect_rows_forward_impl, Device::CUDA, detect_rows_forward_cuda);
HT_OP_IMPLEMENTATION(detect_rows_backward_impl, Device::CUDA, detect_rows_backward_cuda);

}  // namespace hetrain::ops
