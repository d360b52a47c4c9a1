// ops/conv2d/dnnl/dnnl_conv.cpp — convolution forward and backward on oneDNN's JIT kernels (see dnnl_conv.hpp).
//
// Why oneDNN: it generates code at run time for the CPU it finds (AVX2, AVX-512, AMX), so the one binary
// built for x86-64-v2 runs on any compute node and is fast on each; it is also what PyTorch's CPU path
// uses. Our NCHW tensors are reordered into the blocked layouts (e.g. nChw16c) its fastest kernels want,
// per call, in the caller's workspace: measured on ResNet-20's layers the reorders cost a few percent of
// the convolution and the blocked kernels are 4–6× faster than im2col + GEMM (docs/cpu-performance.md).
//
// One Plan per geometry and thread count holds the three primitives, the reorders and where each blocked
// buffer lives in the workspace. Building a plan JIT-compiles kernels (milliseconds), so plans are cached;
// a rank whose share of the batch changes gets a new plan per distinct N, and the cache is cleared when it
// grows past kMaxPlans so a long run with many refits cannot grow without bound.
#include <omp.h>

#include <dnnl.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "ops/conv2d/dnnl_conv.hpp"
#include "hetrain/error.hpp"

namespace hetrain::ops::cpu::dnnl_conv {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr memory::data_type f32 = memory::data_type::f32;
constexpr size_t kAlign = 64;
constexpr size_t kMaxPlans = 256;
constexpr int64_t kChunkBytes = int64_t(4) << 20;  // 2–8 MB measured alike on ResNet-20 (docs/cpu-performance.md)

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// A blocked buffer inside the workspace: its layout and byte offset; `needed` false when the layout oneDNN
// chose is the plain one, so the user's tensor is used directly.
struct Slot {
  memory::desc desc;
  size_t offset = 0;
  bool needed = false;
};

// Places slots one after another from `cursor`; returns the end.
size_t place(Slot& s, const memory::desc& chosen, const memory::desc& plain, size_t cursor) {
  s.desc = chosen;
  s.needed = chosen != plain;
  if (!s.needed) return cursor;
  s.offset = cursor;
  return cursor + aligned(chosen.get_size());
}

struct Plan {
  memory::desc src_plain, weights_plain, dst_plain;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  dnnl::reorder dweight_accumulate;  // blocked diff weights → KCRS, adding to what is there
  // Forward: weights, src, dst, scratchpad. Backward data pass: weights, diff_dst, diff_src, scratchpad.
  // Backward weights pass: diff_weights (always: oneDNN overwrites, we accumulate), src, diff_dst,
  // scratchpad. The three never run at once, so each starts at offset 0.
  Slot f_src, f_weights, f_dst, b_ddst, b_weights, b_dsrc, b_dweights, b_src_w, b_ddst_w;
  size_t f_scratch = 0, b_data_scratch = 0, b_weights_scratch = 0;
  size_t bytes = 0;
};

std::shared_ptr<Plan> make_plan(const Conv2dGeom& g) {
  auto& eng = cpu_engine();
  auto p = std::make_shared<Plan>();
  const memory::dims src{g.N, g.C, g.H, g.W}, wei{g.K, g.C, g.R, g.S}, dst{g.N, g.K, g.P(), g.Q()};
  const memory::dims strides{g.stride, g.stride}, pads{g.pad, g.pad};
  p->src_plain = memory::desc(src, f32, tag::nchw);
  p->weights_plain = memory::desc(wei, f32, tag::oihw);
  p->dst_plain = memory::desc(dst, f32, tag::nchw);
  const memory::desc src_any(src, f32, tag::any), wei_any(wei, f32, tag::any), dst_any(dst, f32, tag::any);

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch lives in the caller's workspace
  p->fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                      src_any, wei_any, dst_any, strides, pads, pads),
      attr, eng);
  p->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                            strides, pads, pads),
      attr, eng, p->fwd_pd);
  p->bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                               strides, pads, pads),
      attr, eng, p->fwd_pd);
  p->fwd = dnnl::convolution_forward(p->fwd_pd);
  p->bwd_data = dnnl::convolution_backward_data(p->bwd_data_pd);
  p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);

  dnnl::post_ops accumulate;
  accumulate.append_sum(1.0f);
  dnnl::primitive_attr accumulate_attr;
  accumulate_attr.set_post_ops(accumulate);
  p->dweight_accumulate = dnnl::reorder(dnnl::reorder::primitive_desc(
      eng, p->bwd_weights_pd.diff_weights_desc(), eng, p->weights_plain, accumulate_attr));

  // Weights first (reordered once per call, shared by all chunks), then the chunk's own buffers.
  size_t f = 0;
  f = place(p->f_weights, p->fwd_pd.weights_desc(), p->weights_plain, f);
  f = place(p->f_src, p->fwd_pd.src_desc(), p->src_plain, f);
  f = place(p->f_dst, p->fwd_pd.dst_desc(), p->dst_plain, f);
  p->f_scratch = f;
  f += aligned(p->fwd_pd.scratchpad_desc().get_size());

  // Backward runs as two passes over the chunks, data then weights, so the weights pass can reuse the
  // space of the data pass's blocked weights for its blocked weight gradient (on ResNet-50 both are as
  // large as any activation chunk).
  size_t b = 0;
  b = place(p->b_weights, p->bwd_data_pd.weights_desc(), p->weights_plain, b);
  b = place(p->b_ddst, p->bwd_data_pd.diff_dst_desc(), p->dst_plain, b);
  b = place(p->b_dsrc, p->bwd_data_pd.diff_src_desc(), p->src_plain, b);
  p->b_data_scratch = b;
  b += aligned(p->bwd_data_pd.scratchpad_desc().get_size());

  size_t w = 0;
  p->b_dweights.desc = p->bwd_weights_pd.diff_weights_desc();
  p->b_dweights.needed = true;
  p->b_dweights.offset = w;
  w += aligned(p->b_dweights.desc.get_size());
  w = place(p->b_src_w, p->bwd_weights_pd.src_desc(), p->src_plain, w);
  w = place(p->b_ddst_w, p->bwd_weights_pd.diff_dst_desc(), p->dst_plain, w);
  p->b_weights_scratch = w;
  w += aligned(p->bwd_weights_pd.scratchpad_desc().get_size());

  p->bytes = std::max({f, b, w}) + kAlign;  // + room to align the workspace's start
  return p;
}

using Key = std::tuple<int, int, int, int, int, int, int, int, int, int>;

// Shared: a call keeps its plans alive even if another call clears the cache meanwhile.
std::shared_ptr<Plan> plan_for(const Conv2dGeom& g) {
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<Plan>> plans;
  const Key key{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.stride, g.pad, omp_get_max_threads()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  if (plans.size() >= kMaxPlans) plans.clear();
  try {
    return plans.emplace(key, make_plan(g)).first->second;
  } catch (const dnnl::error& e) {
    HT_THROW("conv2d (oneDNN): cannot build kernels for N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " K=", g.K,
             " R=", g.R, " S=", g.S, " stride=", g.stride, " pad=", g.pad, ": ", e.what());
  }
}

char* align_start(float* workspace) {
  const auto addr = reinterpret_cast<uintptr_t>(workspace);
  return reinterpret_cast<char*>((addr + kAlign - 1) / kAlign * kAlign);
}

// The user's plain tensor, or its blocked copy in the workspace (filled by a reorder when `fill`).
memory view(const Slot& s, const memory::desc& plain, const void* user, char* base, dnnl::stream& strm,
            bool fill) {
  memory user_mem(plain, cpu_engine(), const_cast<void*>(user));
  if (!s.needed) return user_mem;
  memory blocked(s.desc, cpu_engine(), base + s.offset);
  if (fill) dnnl::reorder(user_mem, blocked).execute(strm, user_mem, blocked);
  return blocked;
}

memory scratch(const memory::desc& desc, char* base, size_t offset) {
  return memory(desc, cpu_engine(), base + offset);
}


// The batch runs in chunks of samples whose blocked copies fit in kChunkBytes: the workspace stays small
// (no larger than im2col's on ResNet-20, docs/cpu-performance.md) and each chunk's copies are still in
// cache when the kernel reads them. Chunks are balanced, so at most two plans (chunk and tail) per layer.
struct Chunks {
  int size = 1, count = 1;
  Conv2dGeom at(const Conv2dGeom& g, int i) const {
    Conv2dGeom c = g;
    c.N = std::min(size, g.N - i * size);
    return c;
  }
};

Chunks chunks_for(const Conv2dGeom& g) {
  const int64_t per_sample = int64_t(g.C) * g.H * g.W * 2 + int64_t(g.K) * g.P() * g.Q() * 2;  // floats
  const int64_t fit = std::max<int64_t>(1, kChunkBytes / int64_t(sizeof(float) * per_sample));
  Chunks c;
  c.count = int((g.N + fit - 1) / fit);
  c.size = (g.N + c.count - 1) / c.count;
  c.count = (g.N + c.size - 1) / c.size;
  return c;
}

}  // namespace

bool available() { return true; }

const char* isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

int64_t workspace_floats(const Conv2dGeom& g) {
  const Chunks c = chunks_for(g);
  size_t bytes = plan_for(c.at(g, 0))->bytes;
  if (c.count > 1) bytes = std::max(bytes, plan_for(c.at(g, c.count - 1))->bytes);
  return int64_t((bytes + sizeof(float) - 1) / sizeof(float));
}

void forward(float* out, const float* in, const float* weight, const Conv2dGeom& g, float* workspace) {
  HT_CHECK(workspace != nullptr, "conv2d_forward: workspace is null");
  char* base = align_start(workspace);
  dnnl::stream strm(cpu_engine());
  const Chunks c = chunks_for(g);
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * g.P() * g.Q();
  std::shared_ptr<Plan> weights_for;  // the plan whose weight layout the workspace holds
  memory wei;
  for (int i = 0; i < c.count; ++i) {
    const std::shared_ptr<Plan> plan = plan_for(c.at(g, i));
    Plan& p = *plan;
    if (!weights_for || p.f_weights.desc != weights_for->f_weights.desc) {
      wei = view(p.f_weights, p.weights_plain, weight, base, strm, true);
      weights_for = plan;
    }
    const float* x = in + i * c.size * in_stride;
    float* y = out + i * c.size * out_stride;
    memory src = view(p.f_src, p.src_plain, x, base, strm, true);
    memory dst = view(p.f_dst, p.dst_plain, y, base, strm, false);
    p.fwd.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst},
                         {DNNL_ARG_SCRATCHPAD, scratch(p.fwd_pd.scratchpad_desc(), base, p.f_scratch)}});
    if (p.f_dst.needed) {
      memory user(p.dst_plain, cpu_engine(), y);
      dnnl::reorder(dst, user).execute(strm, dst, user);
    }
  }
  strm.wait();
}

void backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
              const Conv2dGeom& g, float* workspace) {
  if (!din && !dweight) return;
  HT_CHECK(workspace != nullptr, "conv2d_backward: workspace is null");
  char* base = align_start(workspace);
  dnnl::stream strm(cpu_engine());
  const Chunks c = chunks_for(g);
  const int64_t in_stride = int64_t(g.C) * g.H * g.W, out_stride = int64_t(g.K) * g.P() * g.Q();
  if (din) {  // data pass: din = conv_transpose(dout, weight)
    std::shared_ptr<Plan> weights_for;
    memory wei;
    for (int i = 0; i < c.count; ++i) {
      const std::shared_ptr<Plan> plan = plan_for(c.at(g, i));
      Plan& p = *plan;
      if (!weights_for || p.b_weights.desc != weights_for->b_weights.desc) {
        wei = view(p.b_weights, p.weights_plain, weight, base, strm, true);
        weights_for = plan;
      }
      float* dx = din + i * c.size * in_stride;
      memory ddst = view(p.b_ddst, p.dst_plain, dout + i * c.size * out_stride, base, strm, true);
      memory dsrc = view(p.b_dsrc, p.src_plain, dx, base, strm, false);
      p.bwd_data.execute(
          strm, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dsrc},
                 {DNNL_ARG_SCRATCHPAD, scratch(p.bwd_data_pd.scratchpad_desc(), base, p.b_data_scratch)}});
      if (p.b_dsrc.needed) {
        memory user(p.src_plain, cpu_engine(), dx);
        dnnl::reorder(dsrc, user).execute(strm, dsrc, user);
      }
    }
  }
  if (dweight) {  // weights pass: dweight += Σ over chunks of the chunk's weight gradient
    memory user(plan_for(c.at(g, 0))->weights_plain, cpu_engine(), dweight);
    for (int i = 0; i < c.count; ++i) {
      const std::shared_ptr<Plan> plan = plan_for(c.at(g, i));
      Plan& p = *plan;
      memory src = view(p.b_src_w, p.src_plain, in + i * c.size * in_stride, base, strm, true);
      memory ddst = view(p.b_ddst_w, p.dst_plain, dout + i * c.size * out_stride, base, strm, true);
      memory dw(p.b_dweights.desc, cpu_engine(), base + p.b_dweights.offset);
      p.bwd_weights.execute(
          strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                 {DNNL_ARG_SCRATCHPAD, scratch(p.bwd_weights_pd.scratchpad_desc(), base, p.b_weights_scratch)}});
      p.dweight_accumulate.execute(strm, dw, user);
    }
  }
  strm.wait();
}

}  // namespace hetrain::ops::cpu::dnnl_conv
