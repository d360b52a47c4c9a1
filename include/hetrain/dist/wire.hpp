// hetrain/dist/wire.hpp — the number format gradients travel in between ranks (--reduce-precision,
// docs/architecture.md, "16-bit transport").
//
// FP32 sends the gradients as they are. BF16 and FP16 round each value that leaves a rank to 16 bits (round
// to nearest, ties to even, as CUDA's __float2bfloat16_rn and __float2half_rn do), half the bytes of FP32;
// the receiving rank widens them back to float, which is exact. Weights, the optimizer and the reduced
// gradient the update uses stay FP32.
#pragma once

#include <cstdint>
#include <string>

namespace hetrain::dist {

enum class Wire {
  FP32,  // no rounding
  BF16,  // 8-bit mantissa, float's range: nothing overflows
  FP16,  // 11-bit mantissa, |x| <= 65504 (larger values become ±Inf), subnormals below 6.1e-5
};

const char* wire_name(Wire w);                     // "fp32", "bf16", "fp16"
Wire parse_wire(const std::string& text);          // case-insensitive; throws naming --reduce-precision
inline bool is_16bit(Wire w) { return w != Wire::FP32; }

// One value to 16 bits and back (BF16 or FP16; FP32 is not a 16-bit format and throws).
uint16_t narrow_to_wire(float x, Wire w);
float widen_from_wire(uint16_t h, Wire w);
// Whole buffers, with OpenMP over large ones.
void narrow_to_wire(const float* in, uint16_t* out, int64_t n, Wire w);
void widen_from_wire(const uint16_t* in, float* out, int64_t n, Wire w);
// out[j] = round(Σ_r widen(blocks[r·block + j])) for j < block: `ranks` blocks of 16-bit values summed in
// FP32 in block order and rounded once (the 16-bit exchange's reduction, dist/communicator.hpp).
void sum_on_wire(const uint16_t* blocks, int64_t ranks, int64_t block, uint16_t* out, Wire w);

}  // namespace hetrain::dist
