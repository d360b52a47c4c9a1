// ops/softmax_xent — a classifier's loss and accuracy for one step, on the logits' device: softmax
// cross-entropy with label smoothing ε (target = (1−ε)·onehot + ε/K), its gradient, and the top-1 count.
// CPU: cpu::softmax_xent_* and cpu::top1_correct (hetrain/ops.hpp, softmax_xent_cpu.cpp); CUDA:
// kernels/softmax_xent.cu, whose results come back through pinned memory without stopping the device.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// One implementation's state (the CUDA one keeps device and pinned buffers between steps).
class SoftmaxXentKernel {
 public:
  virtual ~SoftmaxXentKernel() = default;
  virtual Tensor compute(const Tensor& logits, const int32_t* labels, float label_smoothing, bool want_gradient,
                         float grad_scale) = 0;
  virtual void read(double* loss_sum, double* correct) = 0;
};
using SoftmaxXentFactoryFn = std::unique_ptr<SoftmaxXentKernel>();
extern Dispatch<SoftmaxXentFactoryFn> softmax_xent_impl;

// One per use (training, evaluation): compute() starts the work, read() waits for its numbers.
class SoftmaxXentLoss {
 public:
  // logits [n, K]; labels [n] in the logits' device memory. Returns dlogits [n, K] of the MEAN loss over the
  // n rows, times grad_scale (valid until the next compute()); without want_gradient an undefined tensor.
  Tensor compute(const Tensor& logits, const int32_t* labels, float label_smoothing, bool want_gradient,
                 float grad_scale = 1.0f);
  // Σ row losses and the number of rows whose first arg-max is the label, of the last compute().
  void read(double* loss_sum, double* correct);

 private:
  std::unique_ptr<SoftmaxXentKernel> impl_;
  Device device_ = Device::CPU;
};

}  // namespace hetrain::ops
