// ops/normalize_crop_flip/normalize_crop_flip.cpp — the entry point and the CPU implementation.
#include "ops/normalize_crop_flip/normalize_crop_flip.hpp"

namespace hetrain::ops {

Dispatch<NormalizeCropFlipFn> normalize_crop_flip_impl("normalize_crop_flip");

void normalize_crop_flip_cpu(float* out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g) {
  for (int n = 0; n < g.N; ++n) {
    const int y0 = crop_flip ? crop_flip[3 * n] : 0, x0 = crop_flip ? crop_flip[3 * n + 1] : 0;
    const bool flip = crop_flip && crop_flip[3 * n + 2];
    for (int c = 0; c < g.C; ++c)
      for (int y = 0; y < g.out_h; ++y)
        for (int x = 0; x < g.out_w; ++x) {
          const int iy = y0 + y - g.pad, ix = x0 + (flip ? g.out_w - 1 - x : x) - g.pad;
          float v = 0.0f;
          if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) v = in[((int64_t(n) * g.C + c) * g.H + iy) * g.W + ix];
          out[((int64_t(n) * g.C + c) * g.out_h + y) * g.out_w + x] = (v / 255.0f - g.mean[c]) / g.std[c];
        }
  }
}
HT_OP_IMPLEMENTATION(normalize_crop_flip_impl, Device::CPU, normalize_crop_flip_cpu);

void normalize_crop_flip(const Tensor& out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g) {
  check_shape("normalize_crop_flip", "output", out, {g.N, g.C, g.out_h, g.out_w});
  HT_CHECK(g.C >= 1 && g.C <= kMaxImageChannels, "normalize_crop_flip: ", g.C, " channels (at most ",
           kMaxImageChannels, ")");
  // As torchvision's normalize, which refuses a zero std; a NaN std is refused too (the CUDA twin checks the same).
  for (int c = 0; c < g.C; ++c) HT_CHECK(g.std[c] > 0.0f, "normalize_crop_flip: std[", c, "] must be > 0");
  if (g.N == 0) return;
  normalize_crop_flip_impl.on(common_device("normalize_crop_flip", {&out}))(out.data(), in, crop_flip, g);
}

}  // namespace hetrain::ops
