// test/gpu/twins.hpp — plain CPU references for the kernels that have no op in hetrain/ops.hpp.
// Each follows the documented semantics of its launcher in hetrain/cuda.hpp, one element at a time.
#pragma once

#include <cstdint>

#include "hetrain/cuda.hpp"

namespace gpu_test {
void sgd_update_twin(float* param, float* velocity, const float* grad, const float* decay_mask, int64_t n,
                     const hetrain::cuda::SgdStep& step);
void normalize_crop_flip_twin(float* out, const uint8_t* in, const int32_t* crop_flip,
                              const hetrain::cuda::ImageGeom& g);
int64_t count_nonfinite_twin(const float* x, int64_t n);
}  // namespace gpu_test
