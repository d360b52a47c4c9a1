// ops/softmax_xent/softmax_xent.cpp — the loss op's entry points and its CPU implementation, on the CPU
// functions of softmax_xent_cpu.cpp.
#include "ops/softmax_xent/softmax_xent.hpp"

#include "hetrain/ops.hpp"

namespace hetrain::ops {

Dispatch<SoftmaxXentFactoryFn> softmax_xent_impl("softmax_xent");

namespace {
class CpuSoftmaxXent : public SoftmaxXentKernel {
 public:
  Tensor compute(const Tensor& logits, const int32_t* labels, float label_smoothing, bool want_gradient,
                 float grad_scale) override {
    const int64_t n = logits.dim(0), K = logits.dim(1);
    if (!probs_.defined() || probs_.shape() != logits.shape()) probs_ = Tensor(logits.shape());
    const float mean =
        cpu::softmax_xent_forward(probs_.data(), logits.data(), labels, int(n), int(K), label_smoothing);
    loss_sum_ = double(mean) * double(n);
    correct_ = double(cpu::top1_correct(logits.data(), labels, int(n), int(K)));
    if (!want_gradient) return Tensor();
    cpu::softmax_xent_backward(probs_.data(), probs_.data(), labels, int(n), int(K), label_smoothing,
                               grad_scale / float(n));
    return probs_;
  }
  void read(double* loss_sum, double* correct) override { *loss_sum = loss_sum_, *correct = correct_; }

 private:
  Tensor probs_;  // [n, K]; holds dlogits after backward
  double loss_sum_ = 0, correct_ = 0;
};

std::unique_ptr<SoftmaxXentKernel> make_cpu() { return std::make_unique<CpuSoftmaxXent>(); }
}  // namespace
HT_OP_IMPLEMENTATION(softmax_xent_impl, Device::CPU, make_cpu);

Tensor SoftmaxXentLoss::compute(const Tensor& logits, const int32_t* labels, float label_smoothing,
                                bool want_gradient, float grad_scale) {
  HT_CHECK(logits.ndim() == 2, "softmax_xent: expected logits [n, K], got ", shape_str(logits.shape()));
  if (!impl_ || device_ != logits.device()) {
    impl_ = softmax_xent_impl.on(logits.device())();
    device_ = logits.device();
  }
  return impl_->compute(logits, labels, label_smoothing, want_gradient, grad_scale);
}

void SoftmaxXentLoss::read(double* loss_sum, double* correct) {
  HT_CHECK(impl_, "softmax_xent: read() before any compute()");
  impl_->read(loss_sum, correct);
}

}  // namespace hetrain::ops
