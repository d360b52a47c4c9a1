// hetrain/ops.hpp — the CPU implementations of the older ops (namespace ops::cpu), forward and backward side by
// side: the code of src/ops/<op>/ that tests, twins and the training step call by name. The Tensor-level
// entry points that pick a device are the op layer's, namespace ops, in src/ops/<op>/<op>.hpp
// (docs/architecture.md, "Ops").
//
// Conventions (after llm.c): raw pointers, outputs first, shapes in comments, NCHW row-major.
// Ops are templated on the scalar type and instantiated for float (training) and double (the reference
// for finite-difference gradient checks). Backward functions OVERWRITE input gradients (din) and
// ACCUMULATE (+=) parameter gradients (dweight, dbias, dgamma, dbeta), so the flat gradient buffer is
// zeroed once per step. A null gradient pointer means "not needed" (e.g. din of the first layer).
// Each optimised op has a *_naive twin used as the test reference.
// N = 0 (a rank with no samples this step) is allowed everywhere and does nothing (parameter gradients are
// left as they are). Passing a literal nullptr needs the type spelled out: conv2d_backward<float>(nullptr, …).
// Bad sizes or labels throw hetrain::Error naming the op.
#pragma once

#include <cstdint>
#include <string>

#include "hetrain/geometry.hpp"

namespace hetrain::ops::cpu {

// ---------------------------------------------------------------- convolution
// Geometry: Conv2dGeom (hetrain/geometry.hpp).
// Two implementations. conv2d_forward/backward<float> run on oneDNN's JIT kernels when hetrain is built
// with oneDNN (the fast path, docs/cpu-performance.md); <double>, builds without oneDNN and
// set_cpu_conv_backend(Im2col) use im2col + OpenBLAS GEMM, which stays callable by name as the tested twin.
enum class CpuConvBackend { Auto, Im2col };
void set_cpu_conv_backend(CpuConvBackend backend);  // process-wide; Auto by default
const char* cpu_conv_backend_name();                 // what float convolutions use now: "onednn" or "im2col"
// For the rank table: "oneDNN avx512_core_bf16" (the instruction set its kernels use on this CPU), or im2col's.
std::string cpu_kernels_description();

// Scratch elements (of float) conv2d_forward/backward<float> need under the CURRENT OpenMP thread count and
// backend (size it with the thread count you run with); at least conv2d_im2col_workspace_size(g), so the
// same buffer also serves <double> and the im2col twin. Contents need not be initialised.
int64_t conv2d_workspace_size(const Conv2dGeom& g);
// Scratch elements (of T) the im2col implementation needs. Rule: 0 for 1×1 stride-1 unpadded convs whose
// output plane has at least 1024 pixels (GEMM straight on the input); otherwise, with t = min(threads, N)
// threads each working on its own group of nb = min(N, ceil(1024 / (P·Q))) samples: t × (C·R·S × nb·P·Q
// columns, plus K × nb·P·Q for the group's GEMM output when nb > 1) + (t − 1) × K·C·R·S for per-thread
// weight gradients. Non-decreasing in N for a fixed thread count. Forward and backward need the same size.
int64_t conv2d_im2col_workspace_size(const Conv2dGeom& g);

// out [N, K, P, Q]; bias [K] or null.
template <typename T>
void conv2d_forward(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g, T* workspace);
// din [N, C, H, W] (overwritten, may be null); dweight [K, C, R, S] and dbias [K] (accumulated, dbias may be null).
template <typename T>
void conv2d_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                     const Conv2dGeom& g, T* workspace);
// The im2col + GEMM implementation, same contract.
template <typename T>
void conv2d_forward_im2col(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g,
                           T* workspace);
template <typename T>
void conv2d_backward_im2col(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                            const Conv2dGeom& g, T* workspace);
template <typename T>
void conv2d_forward_naive(T* out, const T* in, const T* weight, const T* bias, const Conv2dGeom& g);
template <typename T>
void conv2d_backward_naive(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                           const Conv2dGeom& g);

// ---------------------------------------------------------------- linear
// out [N, O] = in [N, I] · weight[O, I]ᵀ + bias [O] (bias may be null)
template <typename T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, int N, int I, int O);
template <typename T>
void linear_backward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight, int N, int I, int O);

// ---------------------------------------------------------------- batch normalisation (per channel over N·HW)
// Training: normalise with batch statistics, save mean and 1/sqrt(var+eps) [C] for backward, update
// running stats: running = (1-momentum)·running + momentum·batch (running_var uses the unbiased variance,
// as PyTorch does). Eval: normalise with the running statistics.
// Null running_mean/running_var: not updated. Null gamma/beta: 1/0. Training needs N·HW > 1 (as PyTorch).
// Statistics are two-pass in double; saved mean/invstd use the biased variance.
template <typename T>
void batchnorm_forward_train(T* out, T* save_mean, T* save_invstd, T* running_mean, T* running_var, const T* in,
                             const T* gamma, const T* beta, int N, int C, int HW, T momentum, T eps);
template <typename T>
void batchnorm_forward_eval(T* out, const T* in, const T* gamma, const T* beta, const T* running_mean,
                            const T* running_var, int N, int C, int HW, T eps);
template <typename T>
void batchnorm_backward(T* din, T* dgamma, T* dbeta, const T* dout, const T* in, const T* gamma,
                        const T* save_mean, const T* save_invstd, int N, int C, int HW);
// Synchronised batch norm's parts (the statistics of one global batch spread over ranks: each rank sums
// its own values, the sums are added up over the ranks, docs/architecture.md "Batch norm"), in double:
//   stat sums: sums[c] = Σ (x − shift[c]), sums[C + c] = Σ (x − shift[c])² over the N·HW values of channel
//              c. A shift near the mean (the running mean) keeps the one-pass variance's digits.
//   grad sums: sums[c] = Σ dy, sums[C + c] = Σ dy·(x − mean)·invstd.
//   backward with given means: dx = γ·invstd·(dy − mean_dy[c] − x̂·mean_dy_xhat[c]), x̂ = (x − mean)·invstd;
//              din overwritten (with batchnorm_backward's means of this call it is batchnorm_backward's dx).
template <typename T>
void batchnorm_stat_sums(double* sums, const T* in, const T* shift, int N, int C, int HW);
template <typename T>
void batchnorm_grad_sums(double* sums, const T* dout, const T* in, const T* mean, const T* invstd, int N, int C, int HW);
template <typename T>
void batchnorm_backward_given(T* din, const T* dout, const T* in, const T* gamma, const T* mean, const T* invstd,
                              const T* mean_dy, const T* mean_dy_xhat, int N, int C, int HW);

// ---------------------------------------------------------------- activations, residual add
template <typename T>
void relu_forward(T* out, const T* in, int64_t n);
// dout·[out > 0]; din may alias dout.
template <typename T>
void relu_backward(T* din, const T* dout, const T* out, int64_t n);
// out = a + b (residual add). Its backward routes dout unchanged to both inputs.
template <typename T>
void add_forward(T* out, const T* a, const T* b, int64_t n);
// acc += x (used to merge gradient paths)
template <typename T>
void accumulate(T* acc, const T* x, int64_t n);

// ---------------------------------------------------------------- pooling
// Geometry: Pool2dGeom (hetrain/geometry.hpp).
// out [N, C, P, Q]; argmax [N, C, P, Q] holds the flat input index (within the N,C plane) of each max.
template <typename T>
void maxpool2d_forward(T* out, int32_t* argmax, const T* in, const Pool2dGeom& g);
template <typename T>
void maxpool2d_backward(T* din, const T* dout, const int32_t* argmax, const Pool2dGeom& g);
// Average pooling counts padding as zeros (PyTorch's count_include_pad=True).
template <typename T>
void avgpool2d_forward(T* out, const T* in, const Pool2dGeom& g);
template <typename T>
void avgpool2d_backward(T* din, const T* dout, const Pool2dGeom& g);
// out [N, C] = mean over HW of in [N, C, HW]
template <typename T>
void global_avgpool_forward(T* out, const T* in, int N, int C, int HW);
template <typename T>
void global_avgpool_backward(T* din, const T* dout, int N, int C, int HW);

// ---------------------------------------------------------------- loss and metrics
// Softmax cross-entropy with label smoothing ε: target = (1-ε)·onehot + ε/K.
// probs [N, K] (saved for backward); returns the mean loss over N.
template <typename T>
T softmax_xent_forward(T* probs, const T* logits, const int32_t* labels, int N, int K, T label_smoothing);
// dlogits [N, K] = (probs - target) · scale   (scale = 1/N for the mean loss); dlogits may be probs itself
template <typename T>
void softmax_xent_backward(T* dlogits, const T* probs, const int32_t* labels, int N, int K, T label_smoothing,
                           T scale);
// Number of rows whose arg-max equals the label.
template <typename T>
int64_t top1_correct(const T* logits, const int32_t* labels, int N, int K);

}  // namespace hetrain::ops::cpu
