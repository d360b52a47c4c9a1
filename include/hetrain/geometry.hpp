// hetrain/geometry.hpp — the shapes an op and its device twins share: a convolution's, a pooling window's, and
// the GPU input pipeline's image crop. Plain structs, the same in every build configuration, so that the CPU
// ops (hetrain/ops.hpp), the op layer (src/ops/) and the device layer (hetrain/cuda.hpp) need not include
// each other for them.
#pragma once

namespace hetrain {

// ---------------------------------------------------------------- convolution
struct Conv2dGeom {
  int N = 1, C = 1, H = 1, W = 1;  // input  [N, C, H, W]
  int K = 1;                       // output channels; weight [K, C, R, S]
  int R = 1, S = 1;                // kernel height, width
  int stride = 1, pad = 0;
  int P() const { return out_size(H + 2 * pad, R, stride); }  // output height
  int Q() const { return out_size(W + 2 * pad, S, stride); }  // output width
  // Windows of `window` at `stride` over `padded` values; 0 when the window is larger than the padded input
  // (C++ division truncates toward zero, so (2 − 4) / 3 + 1 would say 1).
  static int out_size(int padded, int window, int stride) { return padded < window ? 0 : (padded - window) / stride + 1; }
};

// ---------------------------------------------------------------- pooling (square windows)
struct Pool2dGeom {
  int N = 1, C = 1, H = 1, W = 1;
  int kernel = 2, stride = 2, pad = 0;
  int P() const { return Conv2dGeom::out_size(H + 2 * pad, kernel, stride); }
  int Q() const { return Conv2dGeom::out_size(W + 2 * pad, kernel, stride); }
};

// ---------------------------------------------------------------- images: uint8 [N, C, H, W] → float [N, C, out_h, out_w]
// A crop of the zero-padded image (pad pixels on each side) and a per-channel normalisation
// ((v / 255 − mean[c]) / std[c]); ops/normalize_crop_flip says how crops and flips are given.
constexpr int kMaxImageChannels = 4;
struct ImageGeom {
  int N = 1, C = 3, H = 32, W = 32;
  int out_h = 32, out_w = 32, pad = 0;
  float mean[kMaxImageChannels] = {0, 0, 0, 0};
  float std[kMaxImageChannels] = {1, 1, 1, 1};
};

}  // namespace hetrain
