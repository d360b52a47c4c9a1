// ops/upsample/upsample.cpp — nearest-neighbour upsampling on the CPU, and its Tensor-level entry points.
#include "ops/upsample/upsample.hpp"

#include <algorithm>

#include "ops/common/for_slices.hpp"

namespace hetrain::ops {

Dispatch<UpsampleFn> upsample_nearest_forward_impl("upsample_nearest_forward");
Dispatch<UpsampleFn> upsample_nearest_backward_impl("upsample_nearest_backward");

// Both loops run over the rows of the small side: input row r = plane·H + iy owns the output rows
// r·f … r·f + f − 1 (plane·H·f + iy·f), so every output element has exactly one writer and the result does not
// depend on the thread count.
template <typename T>
void upsample_nearest_forward_cpu(T* y, const T* x, int64_t planes, int64_t H, int64_t W, int factor) {
  const int64_t f = factor, Wo = W * f, rows = planes * H;
#pragma omp parallel for schedule(static) if (rows * f * Wo > cpu::kSliceParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * W;
    T* yr = y + r * f * Wo;
    for (int64_t ix = 0; ix < W; ++ix)
      for (int64_t s = 0; s < f; ++s) yr[ix * f + s] = xr[ix];
    for (int64_t k = 1; k < f; ++k) std::copy(yr, yr + Wo, yr + k * Wo);
  }
}

template <typename T>
void upsample_nearest_backward_cpu(T* dx, const T* dy, int64_t planes, int64_t H, int64_t W, int factor) {
  const int64_t f = factor, Wo = W * f, rows = planes * H;
#pragma omp parallel for schedule(static) if (rows * f * Wo > cpu::kSliceParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const T* dyr = dy + r * f * Wo;
    T* dxr = dx + r * W;
    for (int64_t ix = 0; ix < W; ++ix) {
      // The order the CUDA twin sums in too: block rows top to bottom, each left to right.
      T acc = T(0);
      for (int64_t k = 0; k < f; ++k)
        for (int64_t s = 0; s < f; ++s) acc += dyr[k * Wo + ix * f + s];
      dxr[ix] = acc;
    }
  }
}

template void upsample_nearest_forward_cpu<float>(float*, const float*, int64_t, int64_t, int64_t, int);
template void upsample_nearest_forward_cpu<double>(double*, const double*, int64_t, int64_t, int64_t, int);
template void upsample_nearest_backward_cpu<float>(float*, const float*, int64_t, int64_t, int64_t, int);
template void upsample_nearest_backward_cpu<double>(double*, const double*, int64_t, int64_t, int64_t, int);

HT_OP_IMPLEMENTATION(upsample_nearest_forward_impl, Device::CPU, upsample_nearest_forward_cpu<float>);
HT_OP_IMPLEMENTATION(upsample_nearest_backward_impl, Device::CPU, upsample_nearest_backward_cpu<float>);

namespace {
// Checks the pair small [N, C, H, W], large [N, C, H·f, W·f].
void check_upsample(const char* op, const Tensor& large, const char* large_what, const Tensor& small,
                    const char* small_what, int factor) {
  HT_CHECK(factor >= 1, op, ": factor must be at least 1, got ", factor);
  HT_CHECK(small.ndim() == 4, op, ": ", small_what, " must be 4-D [N, C, H, W], got ", shape_str(small.shape()));
  const Shape& s = small.shape();
  check_shape(op, large_what, large, {s[0], s[1], s[2] * factor, s[3] * factor});
  common_device(op, {&large, &small});
}
}  // namespace

void upsample_nearest_forward(const Tensor& y, const Tensor& x, int factor) {
  check_upsample("upsample_nearest_forward", y, "output", x, "input", factor);
  upsample_nearest_forward_impl.on(x.device())(y.data(), x.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), factor);
}

void upsample_nearest_backward(const Tensor& dx, const Tensor& dy, int factor) {
  check_upsample("upsample_nearest_backward", dy, "output gradient", dx, "input gradient", factor);
  upsample_nearest_backward_impl.on(dx.device())(dx.data(), dy.data(), dx.dim(0) * dx.dim(1), dx.dim(2), dx.dim(3),
                                                 factor);
}

}  // namespace hetrain::ops
