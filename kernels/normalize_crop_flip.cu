// kernels/normalize_crop_flip.cu — uint8 batch → normalised float batch, with random crop and flip
// (ops/normalize_crop_flip), and the op's CUDA slot.
// The uint8 batch crosses PCIe (4× fewer bytes than floats) and is expanded here. The crop offsets and flip
// flags come from the host (drawn from the data seed), so the kernel is deterministic. CPU twin:
// ops::normalize_crop_flip_cpu (src/ops/normalize_crop_flip/).
#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/normalize_crop_flip/normalize_crop_flip.hpp"

namespace hetrain::cuda {
namespace {
// One thread per output element [n, c, y, x].
__global__ void normalize_crop_flip_kernel(float* out, const uint8_t* in, const int32_t* crop_flip, ImageGeom g) {
  const int64_t total = int64_t(g.N) * g.C * g.out_h * g.out_w;
  HT_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int x = int(r % g.out_w); r /= g.out_w;
    const int y = int(r % g.out_h); r /= g.out_h;
    const int c = int(r % g.C);
    const int64_t n = r / g.C;
    int y0 = 0, x0 = 0, flip = 0;
    if (crop_flip) {
      y0 = crop_flip[3 * n];
      x0 = crop_flip[3 * n + 1];
      flip = crop_flip[3 * n + 2];
    }
    const int xs = flip ? g.out_w - 1 - x : x;
    const int iy = y0 + y - g.pad, ix = x0 + xs - g.pad;
    float v = 0.0f;  // padding pixel (0 before normalisation)
    if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) v = in[((n * g.C + c) * g.H + iy) * int64_t(g.W) + ix];
    out[i] = (v / 255.0f - g.mean[c]) / g.std[c];
  }
}
}  // namespace

void normalize_crop_flip(float* out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g,
                         CudaStream stream) {
  HT_CHECK(g.N >= 0 && g.C >= 1 && g.C <= kMaxImageChannels && g.H > 0 && g.W > 0,
           "normalize_crop_flip: bad geometry N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " (C at most ",
           kMaxImageChannels, ")");
  HT_CHECK(g.out_h > 0 && g.out_w > 0 && g.pad >= 0, "normalize_crop_flip: bad output ", g.out_h, "x", g.out_w,
           " pad ", g.pad);
  HT_CHECK(g.out_h <= g.H + 2 * g.pad && g.out_w <= g.W + 2 * g.pad, "normalize_crop_flip: crop ", g.out_h, "x",
           g.out_w, " larger than the padded image ", g.H + 2 * g.pad, "x", g.W + 2 * g.pad);
  HT_CHECK(crop_flip || (g.out_h == g.H && g.out_w == g.W && g.pad == 0),
           "normalize_crop_flip: without crop offsets the output must be the input size with no padding");
  for (int c = 0; c < g.C; ++c) HT_CHECK(g.std[c] > 0.0f, "normalize_crop_flip: std[", c, "] must be > 0");
  if (g.N == 0) return;
  HT_CHECK(out && in, "normalize_crop_flip: null pointer");
  const int64_t total = int64_t(g.N) * g.C * g.out_h * g.out_w;
  normalize_crop_flip_kernel<<<grid_for(total), kBlock, 0, stream>>>(out, in, crop_flip, g);
  HT_CUDA_CHECK_LAUNCH("normalize_crop_flip");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
void normalize_crop_flip_cuda(float* out, const uint8_t* in, const int32_t* crop_flip, const ImageGeom& g) {
  cuda::normalize_crop_flip(out, in, crop_flip, g, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(normalize_crop_flip_impl, Device::CUDA, normalize_crop_flip_cuda);
}  // namespace hetrain::ops
