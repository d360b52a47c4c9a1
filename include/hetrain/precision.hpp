// hetrain/precision.hpp — the arithmetic a GPU rank computes in (docs/precision.md).
//
// The master weights, the optimizer, batch-norm statistics, the loss and the gradient reduction are FP32 on
// every rank and at every precision; the choice below only changes how a GPU rank's convolutions and
// dense layers multiply. CPU ranks always compute in FP32.
#pragma once

#include <string>

namespace hetrain {

enum class Precision {
  FP32,  // IEEE single precision throughout
  TF32,  // FP32 data; tensor-core products with a 10-bit mantissa (cuDNN/cuBLAS TF32 math)
  BF16,  // convolution and dense-layer operands rounded to bfloat16 (8-bit mantissa), FP32 accumulation
  FP16,  // operands rounded to IEEE half (10-bit mantissa, max 65504), FP32 accumulation; needs loss scaling
};

const char* precision_name(Precision p);  // "fp32", "tf32", "bf16", "fp16"
// "fp32" | "tf32" | "bf16" | "fp16" (case-insensitive); throws naming `option` and the valid values.
Precision parse_precision(const std::string& text, const char* option);
// The training log's line: "precision: bf16 on GPU ranks (...)".
std::string precision_text(Precision p);
// BF16 and FP16: operands are stored in 16 bits.
inline bool is_16bit(Precision p) { return p == Precision::BF16 || p == Precision::FP16; }

}  // namespace hetrain
