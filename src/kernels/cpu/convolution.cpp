// CPU Convolution and Deconvolution: oneDNN convolution_forward / deconvolution_forward (blocked
// layouts picked by oneDNN, reorders around the primitive), and own direct loops for what oneDNN
// rejects (negative pads from output_shape). Both cover 1-D to 3-D; higher ranks use the reference.
// A Convolution's epilogue (residual, fused activation) runs as oneDNN post-ops: a sum post-op over a dst that
// holds the residual first, then eltwise post-ops; the own loops take no epilogue (except as oneDNN's fallback).
#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "core/parallel.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/onednn_epilogue.h"
#include "kernels/ref/activation.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

using dnnl::memory;

// ---------------------------------------------------------------------------------------------
// Shared geometry

// A problem of either op seen as 3-D (1-D and 2-D get leading unit axes).
struct Geometry3 {
  int64_t n = 0, c = 0, m = 0, group = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

Geometry3 geometry3(const ConvWindow& win, const Dims& x, int64_t m, int64_t group) {
  Geometry3 g;
  g.n = x[0];
  g.c = x[1];
  g.m = m;
  g.group = group;
  const int shift = 3 - win.rank();
  for (int i = 0; i < win.rank(); ++i) {
    g.in[shift + i] = x[2 + i];
    g.out[shift + i] = win.output[i];
    g.k[shift + i] = win.kernel[i];
    g.s[shift + i] = win.strides[i];
    g.d[shift + i] = win.dilations[i];
    g.p[shift + i] = win.pads_begin[i];
  }
  return g;
}

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The range [lo, hi) of positions j in [0, count) with 0 <= j * stride + offset < limit.
std::pair<int64_t, int64_t> valid_range(int64_t count, int64_t stride, int64_t offset, int64_t limit) {
  const int64_t lo = std::max<int64_t>(0, ceil_div(-offset, stride));
  const int64_t hi = std::min<int64_t>(count, floor_div(limit - 1 - offset, stride) + 1);
  return {lo, std::max(lo, hi)};
}

const float* bias_data(const KernelContext& ctx) {
  return ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Own code: per (image, output channel) plane, accumulate one kernel tap at a time over rows.

Status conv_loops(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x.dims(), w.dims()));
  const Geometry3 g = geometry3(win, x.dims(), w.dims()[0], a.group);
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.k_size();
  const float* src = x.data<float>();
  const float* wei = w.data<float>();
  const float* bias = bias_data(ctx);
  float* dst = ctx.dst[0].data<float>();
  parallel_for(g.n * g.m, 1, [&](int64_t nm) {
    const int64_t n = nm / g.m, m = nm % g.m, grp = m / mg;
    float* y = dst + nm * out_size;
    std::fill(y, y + out_size, bias ? bias[m] : 0.f);
    for (int64_t c = 0; c < cg; ++c) {
      const float* xp = src + (n * g.c + grp * cg + c) * in_size;
      const float* wp = wei + (m * cg + c) * k_size;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const auto [od0, od1] = valid_range(g.out[0], g.s[0], kd * g.d[0] - g.p[0], g.in[0]);
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const auto [oh0, oh1] = valid_range(g.out[1], g.s[1], kh * g.d[1] - g.p[1], g.in[1]);
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t off_w = kw * g.d[2] - g.p[2];
            const auto [ow0, ow1] = valid_range(g.out[2], g.s[2], off_w, g.in[2]);
            const float wv = wp[(kd * g.k[1] + kh) * g.k[2] + kw];
            for (int64_t od = od0; od < od1; ++od) {
              const int64_t id = od * g.s[0] + kd * g.d[0] - g.p[0];
              for (int64_t oh = oh0; oh < oh1; ++oh) {
                const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.p[1];
                const float* xr = xp + (id * g.in[1] + ih) * g.in[2] + off_w;
                float* yr = y + (od * g.out[1] + oh) * g.out[2];
                for (int64_t ow = ow0; ow < ow1; ++ow) yr[ow] += wv * xr[ow * g.s[2]];
              }
            }
          }
        }
      }
    }
  });
  return Status::ok();
}

bool has_residual(const KernelContext& ctx) { return ctx.src.size() > 3 && ctx.src[3].defined(); }

// The own loops, then the epilogue: where oneDNN declines a Convolution at run time (dynamic shapes).
Status conv_loops_with_epilogue(KernelContext& ctx) {
  float* y = ctx.dst[0].data<float>();
  const int64_t n = ctx.dst[0].numel();
  std::vector<float> aside;  // the residual, where y is its memory (the loops overwrite y first)
  if (has_residual(ctx) && ctx.src[3].raw() == ctx.dst[0].raw()) aside.assign(y, y + n);
  KILN_RETURN_IF_ERROR(conv_loops(ctx));
  if (has_residual(ctx)) {
    const float* r = aside.empty() ? ctx.src[3].data<float>() : aside.data();
    parallel_for(n, 1 << 14, [&](int64_t i) { y[i] += r[i]; });
  }
  ref::apply_fused(ctx.attrs<ConvolutionAttrs>().fused, y, n);
  return Status::ok();
}

// Deconvolution: every input row scatters into the output plane of one output channel.
Status deconv_loops(KernelContext& ctx) {
  const auto& a = ctx.attrs<DeconvolutionAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(a, x.dims(), w.dims()));
  const int64_t mg = w.dims()[1];
  const Geometry3 g = geometry3(win, x.dims(), mg * a.group, a.group);
  const int64_t cg = g.c / g.group;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.k_size();
  const float* src = x.data<float>();
  const float* wei = w.data<float>();
  const float* bias = bias_data(ctx);
  float* dst = ctx.dst[0].data<float>();
  parallel_for(g.n * g.m, 1, [&](int64_t nm) {
    const int64_t n = nm / g.m, m = nm % g.m, grp = m / mg, ml = m % mg;
    float* y = dst + nm * out_size;
    std::fill(y, y + out_size, bias ? bias[m] : 0.f);
    for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c) {
      const float* xp = src + (n * g.c + c) * in_size;
      const float* wp = wei + (c * mg + ml) * k_size;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const auto [id0, id1] = valid_range(g.in[0], g.s[0], kd * g.d[0] - g.p[0], g.out[0]);
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const auto [ih0, ih1] = valid_range(g.in[1], g.s[1], kh * g.d[1] - g.p[1], g.out[1]);
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t off_w = kw * g.d[2] - g.p[2];
            const auto [iw0, iw1] = valid_range(g.in[2], g.s[2], off_w, g.out[2]);
            const float wv = wp[(kd * g.k[1] + kh) * g.k[2] + kw];
            for (int64_t id = id0; id < id1; ++id) {
              const int64_t od = id * g.s[0] + kd * g.d[0] - g.p[0];
              for (int64_t ih = ih0; ih < ih1; ++ih) {
                const int64_t oh = ih * g.s[1] + kh * g.d[1] - g.p[1];
                const float* xr = xp + (id * g.in[1] + ih) * g.in[2];
                float* yr = y + (od * g.out[1] + oh) * g.out[2] + off_w;
                for (int64_t iw = iw0; iw < iw1; ++iw) yr[iw * g.s[2]] += wv * xr[iw];
              }
            }
          }
        }
      }
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// oneDNN

// Everything oneDNN needs for one problem; `deconv` selects deconvolution_forward.
struct OnednnProblem {
  bool deconv = false;
  bool has_bias = false;
  bool residual = false;             // a sum post-op: dst holds the residual when the primitive runs
  FusedActivation fused;             // eltwise post-ops
  memory::desc src, wei, bias, dst;  // plain (kiln) layouts
  memory::dims strides, dilates, pad_l, pad_r;
};

memory::desc dense_desc(const memory::dims& dims, const memory::dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

// Weight descriptor in oneDNN's logical order ([G,] O, I, k...) over kiln's memory: Convolution
// stores [M, C/G, k...], Deconvolution stores [C, M/G, k...] (O and I swapped).
memory::desc weights_desc(const Dims& w, int64_t group, bool deconv) {
  const int spatial = w.rank() - 2;
  int64_t k_size = 1;
  for (int i = 0; i < spatial; ++i) k_size *= w[2 + i];
  const int64_t a = w[0], b = w[1];  // conv: a = M, b = C/G; deconv: a = C, b = M/G
  const int64_t o_per_group = deconv ? b : a / group, i_per_group = deconv ? a / group : b;
  const int64_t o_stride = deconv ? k_size : i_per_group * k_size;
  const int64_t i_stride = deconv ? o_per_group * k_size : k_size;
  memory::dims dims, strides;
  if (group > 1) {
    dims.push_back(group);
    strides.push_back(o_per_group * i_per_group * k_size);
  }
  dims.push_back(o_per_group);
  strides.push_back(o_stride);
  dims.push_back(i_per_group);
  strides.push_back(i_stride);
  int64_t acc = k_size;
  for (int i = 0; i < spatial; ++i) {
    acc /= std::max<int64_t>(w[2 + i], 1);
    dims.push_back(w[2 + i]);
    strides.push_back(std::max<int64_t>(acc, 1));
  }
  return dense_desc(dims, strides);
}

// The post-ops of a problem's epilogue: the residual sum first, then the activation.
dnnl::primitive_attr epilogue_attr(const OnednnProblem& p) {
  dnnl::post_ops ops;
  if (p.residual) ops.append_sum(1.f);
  onednn::append_fused_activation(ops, p.fused);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

// Channels-last weights [M, kH, kW, C/G] in oneDNN's logical order ([G,] O, I, kH, kW).
memory::desc nhwc_weights_desc(const Dims& w, int64_t group) {
  const int64_t m = w[0], kh = w[1], kw = w[2], ig = w[3];
  if (group == 1) return memory::desc({m, ig, kh, kw}, memory::data_type::f32, memory::format_tag::ohwi);
  return memory::desc({group, m / group, ig, kh, kw}, memory::data_type::f32, memory::format_tag::gohwi);
}

bool is_channels_last(const OpCall& call) {
  return call.schema->name == "Convolution" && call.attrs_as<ConvolutionAttrs>().channels_last;
}

int64_t channel_block(const OpCall& call) {
  return call.schema->name == "Convolution" ? call.attrs_as<ConvolutionAttrs>().channel_block : 0;
}

// oneDNN's layout for blocks of `block` channels over NCHW dims (nChw8c, nChw16c).
Result<memory::desc> blocked_desc(const Dims& nchw, int64_t block) {
  if (block != 8 && block != 16) return unsupported("oneDNN's blocked layouts hold 8 or 16 channels, not ", block);
  return memory::desc({nchw[0], nchw[1], nchw[2], nchw[3]}, memory::data_type::f32,
                      block == 8 ? memory::format_tag::nChw8c : memory::format_tag::nChw16c);
}

// The problem of a convolution in channel blocks: the geometry from the NCHW views, blocked memory descriptors.
Result<OnednnProblem> onednn_problem_blocked(const OpCall& call, const Dims& x, const Dims& w, const Dims& y,
                                             bool has_bias);

// The problem of a channels-last convolution: the geometry from the NCHW views, NHWC memory descriptors.
Result<OnednnProblem> onednn_problem_nhwc(const OpCall& call, const Dims& x, const Dims& w, const Dims& y,
                                          bool has_bias);

Result<OnednnProblem> onednn_problem(const OpCall& call, const Dims& x, const Dims& w, const Dims& y, bool has_bias) {
  if (is_channels_last(call)) return onednn_problem_nhwc(call, x, w, y, has_bias);
  if (channel_block(call) > 0) return onednn_problem_blocked(call, x, w, y, has_bias);
  OnednnProblem p;
  p.deconv = call.schema->name == "Deconvolution";
  ConvWindow win;
  int64_t group;
  if (p.deconv) {
    const auto& a = call.attrs_as<DeconvolutionAttrs>();
    KILN_ASSIGN_OR_RETURN(win, deconvolution_window(a, x, w));
    group = a.group;
  } else {
    const auto& a = call.attrs_as<ConvolutionAttrs>();
    KILN_ASSIGN_OR_RETURN(win, convolution_window(a, x, w));
    group = a.group;
    p.residual = call.has_input(3);
    p.fused = a.fused;
    KILN_RETURN_IF_ERROR(onednn::supports_fused_activation(p.fused));
  }
  if (win.rank() > 3) return unsupported("oneDNN has no ", win.rank(), "-D convolution");
  for (int i = 0; i < win.rank(); ++i) {
    // The small side's size (conv: output, deconv: input) decides the end pad oneDNN expects.
    const int64_t small = p.deconv ? x[2 + i] : win.output[i];
    const int64_t large = p.deconv ? win.output[i] : x[2 + i];
    const int64_t pad_r = (small - 1) * win.strides[i] + win.extent(i) - large - win.pads_begin[i];
    // oneDNN accepts a negative end pad down to -stride + 1 (input left over by the floor).
    if (win.pads_begin[i] < 0 || pad_r + win.strides[i] <= 0)
      return unsupported("oneDNN takes no negative pads (output_shape beyond the full output on axis ", i, ")");
    p.strides.push_back(win.strides[i]);
    p.dilates.push_back(win.dilations[i] - 1);
    p.pad_l.push_back(win.pads_begin[i]);
    p.pad_r.push_back(pad_r);
  }
  p.has_bias = has_bias;
  p.src = onednn::plain_desc(x, DataType::kFloat32);
  p.dst = onednn::plain_desc(y, DataType::kFloat32);
  p.wei = weights_desc(w, group, p.deconv);
  if (has_bias) p.bias = onednn::plain_desc(Dims{y[1]}, DataType::kFloat32);
  return p;
}

Result<OnednnProblem> onednn_problem_nhwc(const OpCall& call, const Dims& x, const Dims& w, const Dims& y,
                                          bool has_bias) {
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4)
    return unsupported("a channels_last convolution is 2-D: x [N, H, W, C], w [M, kH, kW, C/group]");
  ConvolutionAttrs nchw = call.attrs_as<ConvolutionAttrs>();
  nchw.channels_last = false;
  OpCall view = call;
  view.attrs = &nchw;
  KILN_ASSIGN_OR_RETURN(OnednnProblem p,
                        onednn_problem(view, nhwc_to_nchw(x), nhwc_to_nchw(w), nhwc_to_nchw(y), has_bias));
  p.src = onednn::nhwc_desc(x, DataType::kFloat32);
  p.dst = onednn::nhwc_desc(y, DataType::kFloat32);
  p.wei = nhwc_weights_desc(w, nchw.group);
  return p;
}

Result<OnednnProblem> onednn_problem_blocked(const OpCall& call, const Dims& x, const Dims& w, const Dims& y,
                                             bool has_bias) {
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (x.rank() != (a.plain_input ? 4 : 5) || w.rank() != 4 || y.rank() != 5)
    return unsupported("a convolution in channel blocks is 2-D: x [N, C/B, H, W, B], w [M, C/group, kH, kW]");
  ConvolutionAttrs nchw = a;
  nchw.channel_block = 0;
  nchw.plain_input = false;
  OpCall view = call;
  view.attrs = &nchw;
  const Dims x_nchw = a.plain_input ? x : blocked_to_nchw(x), y_nchw = blocked_to_nchw(y);
  KILN_ASSIGN_OR_RETURN(OnednnProblem p, onednn_problem(view, x_nchw, w, y_nchw, has_bias));
  if (!a.plain_input) {
    KILN_ASSIGN_OR_RETURN(p.src, blocked_desc(x_nchw, a.channel_block));
  }
  KILN_ASSIGN_OR_RETURN(p.dst, blocked_desc(y_nchw, a.channel_block));
  return p;
}

memory::desc any_desc(const memory::desc& d) {
  return memory::desc(d.dims(), memory::data_type::f32, memory::format_tag::any);
}

// A primitive with the reorders around it (null where the plain layout is what it wants).
struct OnednnPlan {
  dnnl::primitive prim;
  memory::desc src_md, wei_md, dst_md;
  std::optional<dnnl::reorder> src_in, wei_in, dst_out;
  std::optional<dnnl::reorder> residual_in;  // the residual into the blocked dst before the sum post-op
  memory wei_mem;        // the weights in the primitive's layout, when reordered (kept: prepared once)
  std::string impl;      // oneDNN's implementation, e.g. "jit:avx512_core" or "ref:any"
  size_t workspace = 0;  // the scratchpad and the blocked activation buffers
};

// Tactics: "blocked" lets oneDNN pick the activations' layout (reorders in and out around the
// primitive); "plain" keeps kiln's row-major layout (no reorders, other implementations). Weights are
// always in the primitive's preferred layout. A convolution with an epilogue (residual, activation) also has
// "+epilogue" variants: the primitive runs without post-ops and kiln's own vectorized pass adds the residual and
// applies the activation on the plain output (oneDNN 2.6's gemm convolution applies post-ops with reference code).
constexpr const char* kBlocked = "blocked";
constexpr const char* kPlain = "plain";
constexpr const char* kBlockedEpilogue = "blocked+epilogue";
constexpr const char* kPlainEpilogue = "plain+epilogue";

struct ConvTactic {
  bool plain = false;
  bool own_epilogue = false;
};

std::optional<ConvTactic> parse_tactic(const std::string& t) {
  if (t.empty() || t == kBlocked) return ConvTactic{false, false};
  if (t == kPlain) return ConvTactic{true, false};
  if (t == kBlockedEpilogue) return ConvTactic{false, true};
  if (t == kPlainEpilogue) return ConvTactic{true, true};
  return std::nullopt;
}

// A call's tactic. A convolution in channel blocks is run as it is ("plain", also the default): its activations are
// in oneDNN's layout already.
std::optional<ConvTactic> tactic_of(const OpCall& call) {
  if (channel_block(call) > 0)
    return call.tactic.empty() || call.tactic == kPlain ? std::optional<ConvTactic>(ConvTactic{true, false})
                                                        : std::nullopt;
  return parse_tactic(call.tactic);
}

// The problem oneDNN runs for a tactic: without post-ops when kiln applies the epilogue itself.
OnednnProblem for_tactic(OnednnProblem p, const ConvTactic& t) {
  if (t.own_epilogue) {
    p.residual = false;
    p.fused = FusedActivation{};
  }
  return p;
}

// y = act(y + residual) in place, in cache-sized chunks over the threads; ReLU and Clip vectorize.
void own_epilogue(const FusedActivation& fused, const float* residual, float* y, int64_t n) {
  constexpr int64_t kChunk = 1 << 14;
  parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c) {
    const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    float* d = y + begin;
    const int64_t m = end - begin;
    if (residual) {
      const float* r = residual + begin;
      for (int64_t i = 0; i < m; ++i) d[i] += r[i];
    }
    if (!fused.on) return;
    if (fused.kind == ActivationKind::kRelu) {
      for (int64_t i = 0; i < m; ++i) d[i] = d[i] > 0.f ? d[i] : 0.f;
    } else if (fused.kind == ActivationKind::kClip) {
      const float lo = fused.alpha, hi = fused.beta;
      for (int64_t i = 0; i < m; ++i) d[i] = std::min(std::max(d[i], lo), hi);
    } else {
      ref::apply_fused(fused, d, m);
    }
  });
}

template <class Op>
typename Op::primitive_desc make_pd(const OnednnProblem& p, dnnl::algorithm algo, bool plain) {
  const typename Op::desc d(dnnl::prop_kind::forward_inference, algo, plain ? p.src : any_desc(p.src), any_desc(p.wei),
                            p.has_bias ? p.bias : memory::desc(), plain ? p.dst : any_desc(p.dst), p.strides, p.dilates,
                            p.pad_l, p.pad_r);
  return typename Op::primitive_desc(d, epilogue_attr(p), onednn::engine());
}

// Throws dnnl::error when oneDNN has no implementation for the problem.
void check_pd(const OnednnProblem& p) {
  if (p.deconv)
    (void)make_pd<dnnl::deconvolution_forward>(p, dnnl::algorithm::deconvolution_direct, false);
  else
    (void)make_pd<dnnl::convolution_forward>(p, dnnl::algorithm::convolution_direct, false);
}

template <class Prim>
OnednnPlan make_plan(const OnednnProblem& p, dnnl::algorithm algo, bool plain) {
  auto& eng = onednn::engine();
  const auto pd = make_pd<Prim>(p, algo, plain);
  OnednnPlan plan;
  plan.prim = Prim(pd);
  plan.impl = pd.impl_info_str();
  plan.src_md = pd.src_desc();
  plan.wei_md = pd.weights_desc();
  plan.dst_md = pd.dst_desc();
  plan.workspace = pd.scratchpad_desc().get_size();
  if (plan.src_md != p.src) {
    plan.src_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, p.src, eng, plan.src_md));
    plan.workspace += plan.src_md.get_size();
  }
  if (plan.wei_md != p.wei) {
    plan.wei_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, p.wei, eng, plan.wei_md));
  }
  if (plan.dst_md != p.dst) {
    plan.dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan.dst_md, eng, p.dst));
    plan.workspace += plan.dst_md.get_size();
    if (p.residual) plan.residual_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, p.dst, eng, plan.dst_md));
  }
  return plan;
}

OnednnPlan plan_for(const OnednnProblem& p, bool plain) {
  if (p.deconv) return make_plan<dnnl::deconvolution_forward>(p, dnnl::algorithm::deconvolution_direct, plain);
  return make_plan<dnnl::convolution_forward>(p, dnnl::algorithm::convolution_direct, plain);
}

// Prepared weights (stored in the engine at build time): the primitive's weights descriptor as oneDNN's plain C
// struct, then, at the next multiple of 64, the weights in that layout. The descriptor is compared
// with the one the primitive wants at run time (oneDNN's own comparison); any difference (another oneDNN, another
// choice of layout) reorders from the originals.
constexpr size_t kPreparedHeader = (sizeof(dnnl_memory_desc_t) + 63) / 64 * 64;

bool prepared_fits(const Tensor* prepared, const memory::desc& want) {
  if (!prepared || prepared->nbytes() != kPreparedHeader + want.get_size()) return false;
  // The stored descriptor comes from the file: its counts are checked before oneDNN compares it.
  dnnl_memory_desc_t stored;
  std::memcpy(&stored, prepared->raw(), sizeof stored);
  const dnnl_blocking_desc_t& b = stored.format_desc.blocking;
  if (stored.ndims < 0 || stored.ndims > DNNL_MAX_NDIMS || stored.format_kind != dnnl_blocked || b.inner_nblks < 0 ||
      b.inner_nblks > DNNL_MAX_NDIMS)
    return false;
  for (int i = 0; i < b.inner_nblks; ++i)
    if (b.inner_idxs[i] < 0 || b.inner_idxs[i] >= stored.ndims) return false;
  return memory::desc(stored) == want;
}

class OnednnConvolution final : public Kernel {
 public:
  /// Constant weights are used as prepared at build time, or else reordered into the primitive's layout once.
  OnednnConvolution(const Tensor* constant_weights, const Tensor* prepared, ConvTactic tactic, int64_t channel_block)
      : constant_weights_(constant_weights),
        prepared_(prepared),
        plain_(tactic.plain),
        own_epilogue_(tactic.own_epilogue),
        channel_block_(channel_block) {}

  std::string detail() const override {
    if (!ready_) return {};
    return plan_ ? str_cat("oneDNN ", plan_->impl,
                           channel_block_ > 0 ? str_cat(" (blocks of ", channel_block_, " channels)")
                           : plain_           ? " (plain layout)"
                                              : " (blocked layout)",
                           own_epilogue_ && epilogue_ ? ", kiln's epilogue" : "",
                           use_prepared_ ? ", weights prepared at build time" : "")
                 : "own loops (oneDNN declined)";
  }
  size_t workspace_bytes() const override { return plan_ ? plan_->workspace : 0; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    const Tensor& w = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    const bool has_bias = ctx.src.size() > 2 && ctx.src[2].defined();
    const bool deconv = ctx.call.schema->name == "Deconvolution";
    if (!ready_ || x.dims() != x_dims_ || w.dims() != w_dims_ || y.dims() != y_dims_) {
      // Dynamic shapes are first seen here: what oneDNN rejects now runs on the own loops.
      plan_.reset();
      weights_ready_ = false;
      auto problem = onednn_problem(ctx.call, x.dims(), w.dims(), y.dims(), has_bias);
      if (problem.is_ok()) {
        epilogue_ = problem->residual || problem->fused.on;
        fused_ = problem->fused;
        problem_ = for_tactic(*problem, ConvTactic{plain_, own_epilogue_});
        try {
          plan_ = plan_for(problem_, plain_);
          const bool constant = constant_weights_ && constant_weights_->raw() == w.raw();
          use_prepared_ = plan_->wei_in && constant && prepared_fits(prepared_, plan_->wei_md);
          if (use_prepared_)  // oneDNN only reads weights: the read-only mapping of the engine file serves
            plan_->wei_mem = memory(plan_->wei_md, onednn::engine(),
                                    const_cast<char*>(static_cast<const char*>(prepared_->raw())) + kPreparedHeader);
          else if (plan_->wei_in)
            plan_->wei_mem = memory(plan_->wei_md, onednn::engine());
        } catch (const dnnl::error&) {
          plan_.reset();
          use_prepared_ = false;
        }
      }
      x_dims_ = x.dims();
      w_dims_ = w.dims();
      y_dims_ = y.dims();
      ready_ = true;
    }
    if (!plan_ && is_channels_last(ctx.call))
      return unsupported("oneDNN declined this channels_last convolution at run time (x ", x.dims().to_string(),
                         "); the own loops are NCHW only: build the engine with `--disable-pass layout-nhwc`");
    if (!plan_ && channel_block(ctx.call) > 0)
      return unsupported("oneDNN declined this convolution in channel blocks at run time (x ", x.dims().to_string(),
                         "); the own loops are NCHW only: build the engine with `--disable-pass layout-blocked`");
    if (!plan_) return deconv ? deconv_loops(ctx) : conv_loops_with_epilogue(ctx);
    return onednn::guard("convolution", [&] {
      auto& s = onednn::stream();
      auto& eng = onednn::engine();
      // kiln's epilogue adds the residual after the primitive: where y holds the residual (the caller bound one
      // memory to both; the runtime does not place these tactics in place), the primitive writes to a scratch buffer
      // and the epilogue adds that to y.
      const bool aside = own_epilogue_ && has_residual(ctx) && ctx.src[3].raw() == y.raw();
      float* result = aside ? static_cast<float*>(onednn::scratch(y.nbytes(), 2)) : y.data<float>();
      memory src(problem_.src, eng, x.raw()), wei(problem_.wei, eng, w.raw()), dst(problem_.dst, eng, result);
      // Blocked activations live in the thread's scratch buffers, shared by every convolution it runs.
      memory src_blk, dst_blk;
      if (plan_->src_in) {
        src_blk = memory(plan_->src_md, eng, onednn::scratch(plan_->src_md.get_size(), 0));
        plan_->src_in->execute(s, src, src_blk);
      }
      if (plan_->dst_out) dst_blk = memory(plan_->dst_md, eng, onednn::scratch(plan_->dst_md.get_size(), 1));
      if (problem_.residual) {  // the sum post-op adds what dst holds: the residual, in the primitive's layout
        const Tensor& r = ctx.src[3];
        if (plan_->residual_in) {
          memory residual(problem_.dst, eng, const_cast<void*>(r.raw()));
          plan_->residual_in->execute(s, residual, dst_blk);
        } else if (r.raw() != y.raw()) {
          std::memcpy(y.raw(), r.raw(), y.nbytes());
        }
      }
      const bool constant = constant_weights_ && constant_weights_->raw() == w.raw();
      if (plan_->wei_in && !use_prepared_ && !(constant && weights_ready_))
        plan_->wei_in->execute(s, wei, plan_->wei_mem);
      weights_ready_ = constant;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, plan_->src_in ? src_blk : src},
                                           {DNNL_ARG_WEIGHTS, plan_->wei_in ? plan_->wei_mem : wei},
                                           {DNNL_ARG_DST, plan_->dst_out ? dst_blk : dst}};
      if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(problem_.bias, eng, ctx.src[2].raw()));
      plan_->prim.execute(s, args);
      if (plan_->dst_out) plan_->dst_out->execute(s, dst_blk, dst);
      s.wait();
      if (own_epilogue_ && epilogue_) {
        // y = act(y + residual), or where y holds the residual, act(y + the primitive's result).
        const float* r = aside ? result : has_residual(ctx) ? ctx.src[3].data<float>() : nullptr;
        own_epilogue(fused_, r, y.data<float>(), y.numel());
      }
    });
  }

 private:
  const Tensor* constant_weights_;
  const Tensor* prepared_;
  bool plain_;
  bool own_epilogue_;
  int64_t channel_block_;
  bool epilogue_ = false;  // the problem has a residual or an activation
  FusedActivation fused_;
  bool use_prepared_ = false;
  bool weights_ready_ = false;
  bool ready_ = false;
  Dims x_dims_, w_dims_, y_dims_;
  OnednnProblem problem_;
  std::optional<OnednnPlan> plan_;
};

// The own loops take NCHW activations only; channels_last (the layout-nhwc pass) and channel blocks (layout-blocked)
// are oneDNN's.
Status reject_channels_last(const OpCall& call) {
  if (is_channels_last(call))
    return unsupported("the CPU convolution loops take NCHW tensors, not channels_last (NHWC)");
  if (channel_block(call) > 0)
    return unsupported("the CPU convolution loops take NCHW tensors, not blocks of ", channel_block(call), " channels");
  return Status::ok();
}

// Channels-last on the CPU pays where oneDNN's NHWC kernels are fast: not for a few input channels per group
// other than depthwise (a network's first convolution over RGB stays NCHW), and only with static shapes
// (oneDNN must take the problem at build time: the own loops cannot stand in for it at run time).
Status channels_last_supports(const OpCall& call) {
  if (channel_block(call) > 0 && (!call.inputs[0].dims.is_static() || !call.outputs[0].dims.is_static()))
    return unsupported("channel blocks on the CPU need static shapes");
  if (!is_channels_last(call)) return Status::ok();
  const Dims& x = call.inputs[0].dims;
  const Dims& w = call.inputs[1].dims;
  if (!x.is_static() || !w.is_static() || !call.outputs[0].dims.is_static())
    return unsupported("channels_last on the CPU needs static shapes");
  const int64_t group = call.attrs_as<ConvolutionAttrs>().group;
  if (x.rank() == 4 && w.rank() == 4 && w[3] < 8 && !(group > 1 && w[3] == 1))
    return unsupported("channels_last with ", w[3], " input channels per group: oneDNN's NCHW kernels are faster");
  return Status::ok();
}

// oneDNN takes a problem when it is f32 and, for static shapes, a primitive can be made for it.
Status onednn_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  KILN_RETURN_IF_ERROR(channels_last_supports(call));
  const Dims& x = call.inputs[0].dims;
  if (x.rank() > 5) return unsupported("oneDNN has no convolution over more than 3 spatial axes");
  if (call.schema->name == "Convolution") {
    KILN_RETURN_IF_ERROR(onednn::supports_fused_activation(call.attrs_as<ConvolutionAttrs>().fused));
  }
  const Dims& w = call.inputs[1].dims;
  const Dims& y = call.outputs[0].dims;
  if (!x.is_static() || !w.is_static() || !y.is_static()) return Status::ok();
  if (y.numel() == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(OnednnProblem p, onednn_problem(call, x, w, y, call.has_input(2)));
  try {
    check_pd(p);
  } catch (const dnnl::error& e) {
    return unsupported("oneDNN rejects this ", call.schema->name, ": ", e.what());
  }
  return Status::ok();
}

Status loops_support(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  KILN_RETURN_IF_ERROR(reject_channels_last(call));
  if (call.schema->name == "Convolution" && has_conv_epilogue(call.attrs_as<ConvolutionAttrs>(), call.has_input(3)))
    return unsupported("the CPU convolution loops take no epilogue (residual or fused activation)");
  if (call.inputs[0].dims.rank() > 5) return unsupported("the CPU loops cover 1-D to 3-D convolutions only");
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> create_onednn(const OpCall& call) {
  const std::optional<ConvTactic> tactic = tactic_of(call);
  if (!tactic) return invalid_argument("cpu.onednn.convolution has no tactic '", call.tactic, "' for this layer");
  return std::unique_ptr<Kernel>(
      std::make_unique<OnednnConvolution>(call.constant(1), call.prepared, *tactic, channel_block(call)));
}

// Constant weights in the layout the primitive of this tactic wants, made once at build time (see kPreparedHeader).
Result<Tensor> prepare_onednn(const OpCall& call) {
  const Tensor* w = call.constant(1);
  const Dims& x = call.inputs[0].dims;
  const Dims& y = call.outputs[0].dims;
  if (!w || !x.is_static() || !y.is_static() || y.numel() == 0) return Tensor();
  const std::optional<ConvTactic> tactic = tactic_of(call);
  if (!tactic) return invalid_argument("cpu.onednn.convolution has no tactic '", call.tactic, "' for this layer");
  KILN_ASSIGN_OR_RETURN(OnednnProblem problem, onednn_problem(call, x, w->dims(), y, call.has_input(2)));
  const OnednnProblem p = for_tactic(problem, *tactic);
  Tensor out;
  Status st = onednn::guard("weight preparation", [&] {
    OnednnPlan plan = plan_for(p, tactic->plain);
    if (!plan.wei_in) return;  // the primitive takes the weights as they are
    auto blob = Tensor::empty(DataType::kUInt8, Dims{static_cast<int64_t>(kPreparedHeader + plan.wei_md.get_size())});
    if (!blob) return;
    char* base = static_cast<char*>(blob->raw());
    std::memset(base, 0, kPreparedHeader);
    std::memcpy(base, &plan.wei_md.data, sizeof(dnnl_memory_desc_t));
    auto& eng = onednn::engine();
    memory src(p.wei, eng, const_cast<void*>(w->raw())), dst(plan.wei_md, eng, base + kPreparedHeader);
    plan.wei_in->execute(onednn::stream(), src, dst);
    onednn::stream().wait();
    out = std::move(*blob);
  });
  KILN_RETURN_IF_ERROR(st);
  return out;
}

std::vector<std::string> onednn_tactics(const OpCall& call) {
  // Blocked activations are already in oneDNN's layout: no reorders to choose, and its jit kernels apply post-ops.
  if (channel_block(call) > 0) return {kPlain};
  if (call.schema->name == "Convolution" && has_conv_epilogue(call.attrs_as<ConvolutionAttrs>(), call.has_input(3)))
    return {kBlocked, kPlain, kBlockedEpilogue, kPlainEpilogue};
  return {kBlocked, kPlain};
}

// The sum post-op adds what dst holds, so dst may be the residual's memory; the own epilogue would have to keep the
// primitive's result aside there (a scratch buffer as large as y, and a slower run: ResNet-50 b8's 1x1 layers 5-10%).
int onednn_in_place(std::string_view tactic) { return tactic == kBlockedEpilogue || tactic == kPlainEpilogue ? -1 : 3; }

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.convolution",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_supports,
    .create = create_onednn,
    .tactics = onednn_tactics,
    .prepare = prepare_onednn,
    .in_place_input = onednn_in_place,
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.convolution",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = loops_support,
    .create = stateless(conv_loops),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.deconvolution",
    .op = "Deconvolution",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_supports,
    .create = create_onednn,
    .tactics = onednn_tactics,
    .prepare = prepare_onednn,
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.deconvolution",
    .op = "Deconvolution",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = loops_support,
    .create = stateless(deconv_loops),
});

}  // namespace
}  // namespace kiln
