// test/gpu/twins.cpp — CPU twins of sgd_update, normalize_crop_flip and count_nonfinite (see twins.hpp).
#include "twins.hpp"

#include <cmath>

namespace gpu_test {

void sgd_update_twin(float* param, float* velocity, const float* grad, const float* decay_mask, int64_t n,
                     const hetrain::cuda::SgdStep& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float wd = decay_mask ? s.weight_decay * decay_mask[i] : s.weight_decay;
    const float g = s.grad_scale * grad[i] + wd * param[i];
    float step = g;
    if (s.momentum != 0.0f) {
      velocity[i] = s.momentum * velocity[i] + g;
      step = s.nesterov ? g + s.momentum * velocity[i] : velocity[i];
    }
    param[i] -= s.lr * step;
  }
}

void normalize_crop_flip_twin(float* out, const uint8_t* in, const int32_t* crop_flip,
                              const hetrain::cuda::ImageGeom& g) {
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

int64_t count_nonfinite_twin(const float* x, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += !std::isfinite(x[i]);
  return c;
}

}  // namespace gpu_test
