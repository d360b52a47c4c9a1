// test/gpu/relu_test.cpp — cuda::relu_* (cuDNN) against ops::cpu::relu_*. Exact (tolerance 0): a comparison
// and a copy, with exact zeros in the input (the boundary of the mask).
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"

using namespace hetrain;
using gpu_test::expect_close;

TEST(CudaRelu, ParityAndInPlace) {
  HT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(1000003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const size_t un = static_cast<size_t>(n);
    auto in = gpu_test::random_floats(un, 61 + uint32_t(n));
    for (int64_t i = 0; i < n; i += 5) in[size_t(i)] = 0.0f;
    auto dout = gpu_test::random_floats(un, 62 + uint32_t(n));
    std::vector<float> out_ref(un), din_ref(un);
    ops::cpu::relu_forward(out_ref.data(), in.data(), n);
    ops::cpu::relu_backward(din_ref.data(), dout.data(), out_ref.data(), n);

    cuda::DeviceBuffer<float> d_in(un), d_out(un), d_dout(un), d_din(un);
    d_in.upload(in), d_dout.upload(dout);
    CudaStream s = cuda::stream_create();
    cuda::relu_forward(d_out.data(), d_in.data(), n, s);
    cuda::relu_backward(d_din.data(), d_dout.data(), d_out.data(), n, s);
    cuda::stream_synchronize(s);
    expect_close("out", d_out.download(), out_ref, 0, 0);
    expect_close("din", d_din.download(), din_ref, 0, 0);
    // In place: out over in, din over dout.
    cuda::relu_forward(d_in.data(), d_in.data(), n, s);
    cuda::relu_backward(d_dout.data(), d_dout.data(), d_in.data(), n, s);
    cuda::stream_synchronize(s);
    cuda::stream_destroy(s);
    expect_close("out in place", d_in.download(), out_ref, 0, 0);
    expect_close("din in place", d_dout.download(), din_ref, 0, 0);
  }
}
