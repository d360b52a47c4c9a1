// ops/normalize_crop_flip — a uint8 batch to the normalised float batch the model reads, with each sample's
// random crop and flip, on any device (ImageGeom: hetrain/geometry.hpp):
//   out[n,c,y,x] = (in[n,c,y0+y−pad, x0+x'−pad] / 255 − mean[c]) / std[c],  x' = flip ? out_w−1−x : x
// where (y0, x0, flip) = crop_flip[n, 0..2] index the zero-padded image (0 ≤ y0 ≤ H+2·pad−out_h); padding reads
// as 0 before normalisation (torchvision's RandomCrop(padding) + Normalize). The crops and flips are drawn
// on the host from the data seed (src/data/augment.cpp), so every device augments identically.
// crop_flip == null: no crop and no flip (out_h == H, out_w == W, pad == 0), for evaluation.
// GPU ranks run it on the device (uint8 crosses PCIe: 4× fewer bytes than floats): kernels/normalize_crop_flip.cu.
#pragma once

#include <cstdint>

#include "hetrain/geometry.hpp"
#include "ops/dispatch.hpp"

namespace hetrain::ops {

// out: float [N, C, out_h, out_w] on its device; in [N, C, H, W] and crop_flip [N, 3] (or null) in that
// device's memory.
void normalize_crop_flip(const Tensor& out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g);

// The CPU implementation, one element at a time (the reference of the CUDA twin's test).
void normalize_crop_flip_cpu(float* out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g);

using NormalizeCropFlipFn = void(float* out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g);
extern Dispatch<NormalizeCropFlipFn> normalize_crop_flip_impl;

}  // namespace hetrain::ops
