// ops/concat/concat.cpp — channel copies and concatenation on the CPU, and their Tensor-level entry points.
#include "ops/concat/concat.hpp"

#include <algorithm>
#include <string>

#include "ops/common/for_slices.hpp"

namespace hetrain::ops {

Dispatch<CopyChannelsFn> copy_channels_impl("copy_channels");

template <typename T>
void copy_channels_cpu(T* dst, const T* src, const ChannelCopy& g) {
  const int64_t block = g.channels * g.plane;  // contiguous in both tensors, once per sample
  if (g.N == 0 || block == 0) return;
  const int64_t dst_stride = g.dst_channels * g.plane, src_stride = g.src_channels * g.plane;
  T* d = dst + g.dst_offset * g.plane;
  const T* s = src + g.src_offset * g.plane;
  // Slices of all N·block elements rather than whole samples: a batch of one large image still spreads
  // over the threads.
  cpu::for_slices(g.N * block, [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t n = b / block, i = b % block, len = std::min(e - b, block - i);
      std::copy(s + n * src_stride + i, s + n * src_stride + i + len, d + n * dst_stride + i);
      b += len;
    }
  });
}

template <typename T>
void concat_channels_forward_cpu(T* y, const std::vector<const T*>& xs, const std::vector<int64_t>& channels,
                                 int64_t N, int64_t plane) {
  int64_t total = 0;
  for (int64_t c : channels) total += c;
  int64_t offset = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    copy_channels_cpu(y, xs[i], ChannelCopy{N, plane, total, offset, channels[i], 0, channels[i]});
    offset += channels[i];
  }
}

template <typename T>
void concat_channels_backward_cpu(const std::vector<T*>& dxs, const T* dy, const std::vector<int64_t>& channels,
                                  int64_t N, int64_t plane) {
  int64_t total = 0;
  for (int64_t c : channels) total += c;
  int64_t offset = 0;
  for (size_t i = 0; i < dxs.size(); ++i) {
    if (dxs[i]) copy_channels_cpu(dxs[i], dy, ChannelCopy{N, plane, channels[i], 0, total, offset, channels[i]});
    offset += channels[i];
  }
}

template void copy_channels_cpu<float>(float*, const float*, const ChannelCopy&);
template void copy_channels_cpu<double>(double*, const double*, const ChannelCopy&);
template void concat_channels_forward_cpu<float>(float*, const std::vector<const float*>&,
                                                 const std::vector<int64_t>&, int64_t, int64_t);
template void concat_channels_forward_cpu<double>(double*, const std::vector<const double*>&,
                                                  const std::vector<int64_t>&, int64_t, int64_t);
template void concat_channels_backward_cpu<float>(const std::vector<float*>&, const float*,
                                                  const std::vector<int64_t>&, int64_t, int64_t);
template void concat_channels_backward_cpu<double>(const std::vector<double*>&, const double*,
                                                   const std::vector<int64_t>&, int64_t, int64_t);

HT_OP_IMPLEMENTATION(copy_channels_impl, Device::CPU, copy_channels_cpu<float>);

namespace {
void check_4d(const char* op, const char* what, const Tensor& t) {
  HT_CHECK(t.ndim() == 4, op, ": ", what, " must be 4-D [N, C, H, W], got ", shape_str(t.shape()));
}
}  // namespace

void copy_channels(const Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t channels) {
  const char* op = "copy_channels";
  check_4d(op, "destination", dst);
  check_4d(op, "source", src);
  check_shape(op, "source", src, {dst.dim(0), src.dim(1), dst.dim(2), dst.dim(3)});
  HT_CHECK(channels >= 0 && dst_offset >= 0 && src_offset >= 0, op, ": negative channel range (", channels,
           " channels from ", src_offset, " to ", dst_offset, ")");
  HT_CHECK(dst_offset + channels <= dst.dim(1), op, ": channels [", dst_offset, ", ", dst_offset + channels,
           ") do not fit the destination's ", dst.dim(1));
  HT_CHECK(src_offset + channels <= src.dim(1), op, ": channels [", src_offset, ", ", src_offset + channels,
           ") do not fit the source's ", src.dim(1));
  const Device device = common_device(op, {&dst, &src});
  const ChannelCopy g{dst.dim(0), dst.dim(2) * dst.dim(3), dst.dim(1), dst_offset, src.dim(1), src_offset, channels};
  copy_channels_impl.on(device)(dst.data(), src.data(), g);
}

void concat_channels_forward(const Tensor& y, const std::vector<Tensor>& xs) {
  const char* op = "concat_channels_forward";
  HT_CHECK(!xs.empty(), op, ": no inputs");
  check_4d(op, "output", y);
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string what = "input " + std::to_string(i);
    check_4d(op, what.c_str(), xs[i]);
    check_shape(op, what.c_str(), xs[i], {y.dim(0), xs[i].dim(1), y.dim(2), y.dim(3)});
    common_device(op, {&y, &xs[i]});
    total += xs[i].dim(1);
  }
  HT_CHECK(total == y.dim(1), op, ": the inputs have ", total, " channels in all, the output ", y.dim(1));
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    copy_channels(y, offset, x, 0, x.dim(1));
    offset += x.dim(1);
  }
}

void concat_channels_backward(const std::vector<Tensor>& dxs, const Tensor& dy, const std::vector<int64_t>& channels) {
  const char* op = "concat_channels_backward";
  HT_CHECK(!dxs.empty(), op, ": no input gradients");
  check_4d(op, "output gradient", dy);
  HT_CHECK(channels.empty() || channels.size() == dxs.size(), op, ": ", channels.size(), " channel counts for ",
           dxs.size(), " input gradients");
  std::vector<int64_t> c = channels;
  if (c.empty()) {
    for (size_t i = 0; i < dxs.size(); ++i) {
      HT_CHECK(dxs[i].defined(), op, ": input gradient ", i,
               " is undefined (not needed), so the channel counts must be given");
      check_4d(op, ("input gradient " + std::to_string(i)).c_str(), dxs[i]);
      c.push_back(dxs[i].dim(1));
    }
  }
  int64_t total = 0;
  for (size_t i = 0; i < dxs.size(); ++i) {
    HT_CHECK(c[i] >= 0, op, ": input ", i, " has ", c[i], " channels");
    total += c[i];
    if (!dxs[i].defined()) continue;
    const std::string what = "input gradient " + std::to_string(i);
    check_shape(op, what.c_str(), dxs[i], {dy.dim(0), c[i], dy.dim(2), dy.dim(3)});
    common_device(op, {&dy, &dxs[i]});
  }
  HT_CHECK(total == dy.dim(1), op, ": the inputs have ", total, " channels in all, the output gradient ", dy.dim(1));
  int64_t offset = 0;
  for (size_t i = 0; i < dxs.size(); ++i) {
    if (dxs[i].defined()) copy_channels(dxs[i], 0, dy, offset, c[i]);
    offset += c[i];
  }
}

}  // namespace hetrain::ops
