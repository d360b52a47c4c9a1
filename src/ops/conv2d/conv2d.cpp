// ops/conv2d/conv2d.cpp — the convolution's entry point and CPU slot (cpu::conv2d_*).
#include "ops/conv2d/conv2d.hpp"

#include <atomic>
#include <chrono>
#include <string>

#include "hetrain/op_profile.hpp"

namespace hetrain::ops {

Dispatch<Conv2dFactoryFn> conv2d_impl("conv2d");

namespace {
class CpuConv2d : public Conv2dKernel {
 public:
  CpuConv2d(const Conv2dGeom& g, HostScratch* scratch) : g_(g), scratch_(scratch) {
    HT_CHECK(scratch_, "conv2d: a CPU convolution needs Conv2dOptions::scratch");
  }
  // The scratch size depends on the OpenMP thread count at the call, so it is asked each time.
  void forward(float* y, const float* x, const float* w, const float* b) override {
    cpu::conv2d_forward(y, x, w, b, g_, scratch_->get(cpu::conv2d_workspace_size(g_)));
  }
  void backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w) override {
    cpu::conv2d_backward(dx, dw, db, dy, x, w, g_, scratch_->get(cpu::conv2d_workspace_size(g_)));
  }

 private:
  Conv2dGeom g_;
  HostScratch* scratch_;
};

std::unique_ptr<Conv2dKernel> make_cpu_conv(const Conv2dGeom& g, const Conv2dOptions& o) {
  return std::make_unique<CpuConv2d>(g, o.scratch);
}

bool same_geom(const Conv2dGeom& a, const Conv2dGeom& b) {
  return a.N == b.N && a.C == b.C && a.H == b.H && a.W == b.W && a.K == b.K && a.R == b.R && a.S == b.S &&
         a.stride == b.stride && a.pad == b.pad;
}
float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// hetrain/op_profile.hpp: one multiply-add per (output element, input channel, kernel tap).
double conv_flops(const Conv2dGeom& g) {
  return 2.0 * g.N * g.K * double(g.C) * g.R * g.S * g.P() * g.Q();
}
std::string conv_label(const Conv2dGeom& g, const char* pass) {
  return "conv " + std::to_string(g.R) + "x" + std::to_string(g.S) + " s" + std::to_string(g.stride) + " " +
         std::to_string(g.C) + "->" + std::to_string(g.K) + " @" + std::to_string(g.H) + "x" + std::to_string(g.W) +
         " " + pass;
}
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

HT_OP_IMPLEMENTATION(conv2d_impl, Device::CPU, make_cpu_conv);

Conv2dGeom Conv2dOp::geom(const char* who, const Shape& x) const {
  HT_CHECK(x.size() == 4, who, ": expected input [N, C, H, W], got ", shape_str(x));
  Conv2dGeom g;
  g.N = int(x[0]), g.C = int(x[1]), g.H = int(x[2]), g.W = int(x[3]);
  g.K = K_, g.R = kernel_, g.S = kernel_, g.stride = stride_, g.pad = pad_;
  HT_CHECK(g.P() > 0 && g.Q() > 0, who, ": input ", shape_str(x), " is too small for a ", kernel_, "×", kernel_,
           " kernel");
  return g;
}

namespace {
std::atomic<int64_t> g_kernels_made{0};
}  // namespace

int64_t conv2d_kernels_made() { return g_kernels_made.load(); }

Conv2dKernel& Conv2dOp::kernel_for(Device device, const Conv2dGeom& g, const Conv2dOptions& options) {
  if (!impl_ || impl_device_ != device || !same_geom(g, impl_geom_) || impl_precision_ != options.precision) {
    impl_.reset();  // a GPU kernel frees its workspace before the next one allocates
    impl_ = conv2d_impl.on(device)(g, options);
    g_kernels_made.fetch_add(1);
    impl_device_ = device, impl_geom_ = g, impl_precision_ = options.precision;
  }
  return *impl_;
}

void Conv2dOp::forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Conv2dOptions& options) {
  const Conv2dGeom g = geom("conv2d_forward", x.shape());
  check_shape("conv2d_forward", "weight", w, {g.K, g.C, g.R, g.S});
  check_shape("conv2d_forward", "output", y, {g.N, g.K, g.P(), g.Q()});
  if (b.defined()) check_shape("conv2d_forward", "bias", b, {g.K});
  const Device d = common_device("conv2d_forward", {&y, &x, &w, &b});
  const bool profile = op_profiling();
  const auto start = std::chrono::steady_clock::now();
  kernel_for(d, g, options).forward(y.data(), x.data(), w.data(), data_or_null(b));
  if (profile) op_profile_add(conv_label(g, "forward"), seconds_since(start), conv_flops(g));
}

void Conv2dOp::backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                        const Tensor& w, const Conv2dOptions& options) {
  const Conv2dGeom g = geom("conv2d_backward", x.shape());
  check_shape("conv2d_backward", "output gradient", dy, {g.N, g.K, g.P(), g.Q()});
  check_shape("conv2d_backward", "weight gradient", dw, w.shape());
  if (dx.defined()) check_shape("conv2d_backward", "input gradient", dx, x.shape());
  if (db.defined()) check_shape("conv2d_backward", "bias gradient", db, {g.K});
  const Device d = common_device("conv2d_backward", {&dx, &dw, &db, &dy, &x, &w});
  const bool profile = op_profiling();
  const auto start = std::chrono::steady_clock::now();
  kernel_for(d, g, options).backward(data_or_null(dx), dw.data(), data_or_null(db), dy.data(), x.data(), w.data());
  if (profile)
    op_profile_add(conv_label(g, "backward"), seconds_since(start), conv_flops(g) * (dx.defined() ? 2.0 : 1.0));
}

}  // namespace hetrain::ops
