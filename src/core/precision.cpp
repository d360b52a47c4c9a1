#include "hetrain/precision.hpp"

#include <algorithm>
#include <cctype>

#include "hetrain/error.hpp"

namespace hetrain {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

std::string precision_text(Precision p) {
  std::string what;
  switch (p) {
    case Precision::FP32: return "precision: fp32 on every rank";
    case Precision::TF32: what = "TF32 tensor-core products"; break;
    case Precision::BF16: what = "bfloat16 operands, FP32 accumulation"; break;
    case Precision::FP16: what = "FP16 operands, FP32 accumulation, dynamic loss scaling"; break;
  }
  return std::string("precision: ") + precision_name(p) + " in GPU ranks' convolutions and dense layers (" + what +
         "); weights, optimizer, batch norm, loss and gradient reduction in FP32; CPU ranks FP32";
}

Precision parse_precision(const std::string& text, const char* option) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    if (t == precision_name(p)) return p;
  HT_THROW(option, ": unknown precision ", quoted(text), " (use fp32, tf32, bf16 or fp16)");
}

}  // namespace hetrain
