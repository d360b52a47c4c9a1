// test/gpu/twins.hpp — plain CPU references for the kernels that have no op in hetrain/ops.hpp.
// Each follows the documented semantics of its launcher in hetrain/cuda.hpp, one element at a time.
#pragma once

#include <cstdint>

#include "hetrain/cuda.hpp"
#include "hetrain/precision.hpp"

namespace gpu_test {
void sgd_update_twin(float* param, float* velocity, const float* grad, const float* decay_mask,
                     const float* lr_group, int64_t n, const hetrain::cuda::SgdStep& s);
int64_t count_nonfinite_twin(const float* x, int64_t n);
// cuda::cast_to_16bit's rounding (precision BF16 or FP16), returned as the float it widens back to: round to
// nearest, ties to even, to `digits` significand bits (8 or 11) with subnormals below 2^-126 or 2^-14;
// beyond the largest finite value (3.3895e38 or 65504) after rounding: ±Inf. NaN and ±Inf pass through.
float round_to_16bit_twin(float x, hetrain::Precision precision);
// The value of 16-bit pattern `bits` (bfloat16 or IEEE half), as cuda::cast_from_16bit widens it.
float decode_16bit_twin(uint16_t bits, hetrain::Precision precision);
}  // namespace gpu_test
