// ops/conv2d/im2col.hpp — unfold one image into GEMM columns and fold them back (internal to the convolution).
//
// Column matrix of one sample: rows (c, r, s) in that order (C·R·S rows, matching weight [K, C, R, S]),
// columns (p, q) (P·Q of them). Rows are `ld` apart so several samples can sit side by side in one
// [C·R·S, n·P·Q] matrix: sample i starts at column i·P·Q.
#pragma once

#include <cstdint>

#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu::detail {

// col[(c·R + r)·S + s][p·Q + q] = in[c][p·stride − pad + r][q·stride − pad + s], zero outside the image.
// in: one sample [C, H, W].
template <typename T>
void im2col(T* col, int64_t ld, const T* in, const Conv2dGeom& g);

// in[c][h][w] += every column entry that im2col would have taken from (c, h, w). in: one sample [C, H, W].
template <typename T>
void col2im_add(T* in, const T* col, int64_t ld, const Conv2dGeom& g);

}  // namespace hetrain::ops::cpu::detail
