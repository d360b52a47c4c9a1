// ops/conv2d/dnnl_conv.hpp — the oneDNN convolution behind cpu::conv2d_forward/backward<float> (internal to
// the convolution).
//
// Built from src/ops/conv2d/dnnl/ when oneDNN is installed, else from dnnl_absent/ (available() false,
// the calls throw). Activations and weights stay NCHW / KCRS in hetrain's tensors; each call reorders them
// into the blocked layouts oneDNN's JIT kernels choose for this CPU, inside the caller's workspace, and
// back. docs/cpu-performance.md explains the choice and the measured cost of the reorders.
#pragma once

#include <cstdint>

#include "hetrain/ops.hpp"

namespace hetrain::ops::cpu::dnnl_conv {

// True when this build has oneDNN (the choice between it and im2col is made in cpu/conv2d.cpp).
bool available();
// The instruction set oneDNN generates code for on this CPU (e.g. "avx512_core_bf16"), for the rank table.
const char* isa_name();
// Float elements of workspace that forward and backward need for g (blocked copies and oneDNN's scratchpad,
// each 64-byte aligned), under the current OpenMP thread count.
int64_t workspace_floats(const Conv2dGeom& g);
// out [N, K, P, Q] = conv(in, weight), no bias. N ≥ 1.
void forward(float* out, const float* in, const float* weight, const Conv2dGeom& g, float* workspace);
// din overwritten (may be null), dweight accumulated (may be null). N ≥ 1.
void backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
              const Conv2dGeom& g, float* workspace);

}  // namespace hetrain::ops::cpu::dnnl_conv
