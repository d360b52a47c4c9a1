// ops/common/dnnl_absent/dnnl_gemm_absent.cpp — a build without oneDNN: every GEMM goes to OpenBLAS.
#include "ops/common/dnnl_gemm.hpp"
#include "hetrain/error.hpp"

namespace hetrain::ops::cpu::dnnl_gemm {

bool available() { return false; }
void sgemm(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int) {
  HT_THROW("gemm: this hetrain was built without oneDNN");
}

}  // namespace hetrain::ops::cpu::dnnl_gemm
