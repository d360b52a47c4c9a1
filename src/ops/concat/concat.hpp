// ops/concat — channel concatenation (YOLOv5's Concat), built from one primitive: copying a range of
// channels from one NCHW tensor into a range of channels of another with the same N, H and W. The
// forward copies each input into its slice of the output; the backward copies each slice of the output
// gradient back out. Pure copies: every device gives the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// dst[n, dst_offset + c] = src[n, src_offset + c] for c < channels. dst [N, Cd, H, W], src [N, Cs, H, W] with
// the same N, H, W; both ranges inside their tensor; dst and src must not overlap. Other channels of dst are
// left alone.
void copy_channels(const Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t channels);
// y [N, ΣC_i, H, W] ← xs[i] [N, C_i, H, W], in order; at least one input.
void concat_channels_forward(const Tensor& y, const std::vector<Tensor>& xs);
// dxs[i] [N, C_i, H, W] (overwritten) ← its channel slice of dy [N, ΣC_i, H, W]; an undefined dxs[i] is not
// needed and skipped. channels[i] = C_i, as the forward saw them: an undefined dxs[i] has no shape to take C_i
// from, so channels may be left empty only when every dxs[i] is defined.
void concat_channels_backward(const std::vector<Tensor>& dxs, const Tensor& dy,
                              const std::vector<int64_t>& channels = {});

// One copy_channels call on raw memory: dst [N, dst_channels, plane], src [N, src_channels, plane] (plane = H·W).
struct ChannelCopy {
  int64_t N = 0, plane = 0;
  int64_t dst_channels = 0, dst_offset = 0;
  int64_t src_channels = 0, src_offset = 0;
  int64_t channels = 0;
};

// The CPU implementations, for float and double.
template <typename T>
void copy_channels_cpu(T* dst, const T* src, const ChannelCopy& g);
// y [N, ΣC_i, plane] ← xs[i] [N, C_i, plane], C_i = channels[i].
template <typename T>
void concat_channels_forward_cpu(T* y, const std::vector<const T*>& xs, const std::vector<int64_t>& channels,
                                 int64_t N, int64_t plane);
// dxs[i] [N, C_i, plane] ← dy [N, ΣC_i, plane]; a null dxs[i] is skipped.
template <typename T>
void concat_channels_backward_cpu(const std::vector<T*>& dxs, const T* dy, const std::vector<int64_t>& channels,
                                  int64_t N, int64_t plane);

// Per-device implementation on raw float pointers of the tensors' device (CUDA: the legacy default stream).
using CopyChannelsFn = void(float* dst, const float* src, const ChannelCopy& g);
extern Dispatch<CopyChannelsFn> copy_channels_impl;

}  // namespace hetrain::ops
