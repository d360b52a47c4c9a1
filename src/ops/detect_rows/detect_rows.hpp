// ops/detect_rows — the layout change of a YOLO Detect head. A level's 1×1 convolution gives
// x [N, na·no, H, W], channel a·no + field for anchor a (na anchors, no = 5 + classes fields); the loss and the
// decoder want one row of no fields per prediction, all levels stacked: out [N, A, no]. This level's rows are
// row_offset + (a·H + y)·W + x, for its na·H·W predictions. Pure copies: every device gives the same bits.
#pragma once

#include <cstdint>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// out[n, row_offset + (a·H + y)·W + xx, field] = x[n, a·no + field, y, xx]. out [N, A, no], x [N, na·no, H, W];
// only this level's na·H·W rows of out are written (each level writes its own range).
void detect_rows_forward(const Tensor& out, int64_t row_offset, const Tensor& x, int64_t na);
// The inverse gather: dx [N, na·no, H, W] (overwritten) from this level's rows of dout [N, A, no].
void detect_rows_backward(const Tensor& dx, const Tensor& dout, int64_t row_offset, int64_t na);

struct DetectRowsGeom {
  int64_t N = 0;
  int64_t anchors = 0;     // na
  int64_t fields = 0;      // no
  int64_t H = 0, W = 0;    // this level's grid
  int64_t rows = 0;        // A: the rows of out, all levels together
  int64_t row_offset = 0;  // this level's first row
};

// The CPU implementations, for float and double; shapes as above.
template <typename T>
void detect_rows_forward_cpu(T* out, const T* x, const DetectRowsGeom& g);
template <typename T>
void detect_rows_backward_cpu(T* dx, const T* dout, const DetectRowsGeom& g);

// Per-device implementations on raw float pointers of the tensors' device (CUDA: the legacy default stream).
// (out, x) forward, (dx, dout) backward.
using DetectRowsFn = void(float* dst, const float* src, const DetectRowsGeom& g);
extern Dispatch<DetectRowsFn> detect_rows_forward_impl;
extern Dispatch<DetectRowsFn> detect_rows_backward_impl;

}  // namespace hetrain::ops
