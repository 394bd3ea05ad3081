// CPU ConvolutionBackwardData and ConvolutionBackwardFilter through oneDNN's convolution backward primitives
// (data and weights), on kiln's row-major layouts or on layouts oneDNN picks (two tactics); the forward primitive
// descriptor is the hint oneDNN asks for.
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/onednn.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

using dnnl::memory;

// The problem in oneDNN's terms; `x` and `w` are the forward's input and weight dims.
struct Problem {
  memory::desc src, wei, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

// Weights [M, C/G, k...] as oneDNN's ([G,] O, I, k...) over kiln's memory.
memory::desc weights_desc(const Dims& w, int64_t group) {
  memory::dims dims, strides;
  int64_t k_size = 1;
  for (int i = 2; i < w.rank(); ++i) k_size *= w[i];
  const int64_t o = w[0] / group, in = w[1];
  if (group > 1) {
    dims.push_back(group);
    strides.push_back(o * in * k_size);
  }
  dims.push_back(o);
  strides.push_back(in * k_size);
  dims.push_back(in);
  strides.push_back(k_size);
  int64_t acc = k_size;
  for (int i = 2; i < w.rank(); ++i) {
    acc /= std::max<int64_t>(w[i], 1);
    dims.push_back(w[i]);
    strides.push_back(std::max<int64_t>(acc, 1));
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

Result<Problem> make_problem(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, w));
  if (win.rank() > 3) return unsupported("oneDNN has no ", win.rank(), "-D convolution");
  Problem p;
  Dims y = x;
  y[1] = w[0];
  for (int i = 0; i < win.rank(); ++i) {
    y[2 + i] = win.output[i];
    const int64_t pad_r = (win.output[i] - 1) * win.strides[i] + win.extent(i) - x[2 + i] - win.pads_begin[i];
    if (pad_r + win.strides[i] <= 0) return unsupported("oneDNN takes no end pad of ", pad_r, " on axis ", i);
    p.strides.push_back(win.strides[i]);
    p.dilates.push_back(win.dilations[i] - 1);
    p.pad_l.push_back(win.pads_begin[i]);
    p.pad_r.push_back(pad_r);
  }
  p.src = onednn::plain_desc(x, DataType::kFloat32);
  p.dst = onednn::plain_desc(y, DataType::kFloat32);
  p.wei = weights_desc(w, a.group);
  return p;
}

memory::desc any_desc(const memory::desc& d) {
  return memory::desc(d.dims(), memory::data_type::f32, memory::format_tag::any);
}

// "plain" runs on kiln's row-major layouts (oneDNN's gemm-based kernels); "blocked" lets oneDNN pick the layouts
// (its direct JIT kernels) with reorders in and out. The builder times both.
constexpr const char* kPlain = "plain";
constexpr const char* kBlocked = "blocked";

dnnl::convolution_forward::primitive_desc forward_hint(const Problem& p, bool blocked) {
  const auto f = [blocked](const memory::desc& d) { return blocked ? any_desc(d) : d; };
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                          f(p.src), f(p.wei), f(p.dst), p.strides, p.dilates, p.pad_l, p.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, onednn::engine());
}

// The backward primitive with the layouts it chose for its two inputs and its output.
struct Plan {
  dnnl::primitive prim;
  memory::desc in0, in1, out;  // data: diff_dst, weights -> diff_src; filter: src, diff_dst -> diff_weights
  std::string impl;
};

// Throws dnnl::error when oneDNN has no implementation.
template <bool kData>
Plan make_plan(const Problem& p, bool blocked) {
  const auto f = [blocked](const memory::desc& d) { return blocked ? any_desc(d) : d; };
  const auto hint = forward_hint(p, blocked);
  Plan plan;
  if constexpr (kData) {
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, f(p.src), f(p.wei), f(p.dst),
                                                  p.strides, p.dilates, p.pad_l, p.pad_r);
    const dnnl::convolution_backward_data::primitive_desc pd(d, onednn::engine(), hint);
    plan = {dnnl::convolution_backward_data(pd), pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc(),
            pd.impl_info_str()};
  } else {
    const dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, f(p.src), f(p.wei), f(p.dst),
                                                     p.strides, p.dilates, p.pad_l, p.pad_r);
    const dnnl::convolution_backward_weights::primitive_desc pd(d, onednn::engine(), hint);
    plan = {dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc(),
            pd.impl_info_str()};
  }
  return plan;
}

// `t` as memory of layout `want`: itself, or a reorder into `buffer` (made on first use).
memory in_layout(const memory::desc& plain, const memory::desc& want, const Tensor& t, std::optional<memory>& buffer) {
  memory src = onednn::memory(plain, t);
  if (want == plain) return src;
  if (!buffer || buffer->get_desc() != want) buffer = memory(want, onednn::engine());
  dnnl::reorder(src, *buffer).execute(onednn::stream(), src, *buffer);
  return *buffer;
}

template <bool kData>
class OnednnConvolutionBackward final : public Kernel {
 public:
  explicit OnednnConvolutionBackward(bool blocked) : blocked_(blocked) {}

  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<ConvolutionAttrs>();
    // Data: (dy, w, x) -> dx. Filter: (x, dy) -> dw.
    const Dims x = kData ? ctx.src[2].dims() : ctx.src[0].dims();
    const Dims w = kData ? ctx.src[1].dims() : ctx.dst[0].dims();
    if (!plan_ || x != x_ || w != w_) {
      KILN_ASSIGN_OR_RETURN(problem_, make_problem(a, x, w));
      KILN_RETURN_IF_ERROR(
          onednn::guard("convolution backward", [&] { plan_ = make_plan<kData>(problem_, blocked_); }));
      x_ = x;
      w_ = w;
    }
    return onednn::guard("convolution backward", [&] {
      const Problem& p = problem_;
      const memory::desc& in0 = kData ? p.dst : p.src;
      const memory::desc& in1 = kData ? p.wei : p.dst;
      const memory::desc& out = kData ? p.src : p.wei;
      const memory m0 = in_layout(in0, plan_->in0, ctx.src[0], buf0_);
      const memory m1 = in_layout(in1, plan_->in1, ctx.src[1], buf1_);
      memory dst = onednn::memory(out, ctx.dst[0]);
      memory o = dst;
      if (plan_->out != out) {
        if (!buf2_ || buf2_->get_desc() != plan_->out) buf2_ = memory(plan_->out, onednn::engine());
        o = *buf2_;
      }
      if constexpr (kData) {
        plan_->prim.execute(onednn::stream(),
                            {{DNNL_ARG_DIFF_DST, m0}, {DNNL_ARG_WEIGHTS, m1}, {DNNL_ARG_DIFF_SRC, o}});
      } else {
        plan_->prim.execute(onednn::stream(),
                            {{DNNL_ARG_SRC, m0}, {DNNL_ARG_DIFF_DST, m1}, {DNNL_ARG_DIFF_WEIGHTS, o}});
      }
      if (plan_->out != out) dnnl::reorder(o, dst).execute(onednn::stream(), o, dst);
      onednn::stream().wait();
    });
  }
  std::string detail() const override { return plan_ ? plan_->impl : std::string(); }
  size_t workspace_bytes() const override {
    size_t bytes = 0;
    for (const auto* b : {&buf0_, &buf1_, &buf2_})
      if (*b) bytes += (*b)->get_desc().get_size();
    return bytes;
  }

 private:
  bool blocked_;
  Dims x_, w_;
  Problem problem_;
  std::optional<Plan> plan_;
  std::optional<memory> buf0_, buf1_, buf2_;
};

template <bool kData>
Status onednn_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (a.fused.on || a.channels_last) return unsupported("no fused activation or channels_last in a backward op");
  const Dims& x = kData ? call.inputs[2].dims : call.inputs[0].dims;
  const Dims& w = kData ? call.inputs[1].dims : call.outputs[0].dims;
  if (!x.is_static() || !w.is_static()) return Status::ok();  // checked when the shapes are known
  if (x.numel() == 0 || w.numel() == 0) return unsupported("oneDNN takes no empty tensors");
  KILN_ASSIGN_OR_RETURN(Problem p, make_problem(a, x, w));
  const bool blocked = call.tactic == kBlocked;
  return onednn::guard("convolution backward", [&] { make_plan<kData>(p, blocked); });
}

template <bool kData>
KernelImpl impl(const char* name, const char* op) {
  return KernelImpl{
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 10,
      .supports = onednn_supports<kData>,
      .create = [](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<OnednnConvolutionBackward<kData>>(call.tactic == kBlocked));
      },
      .tactics =
          [](const OpCall&) {
            return std::vector<std::string>{kPlain, kBlocked};
          },
  };
}

KILN_REGISTER_KERNEL(impl<true>("cpu.onednn.convolution_backward_data", "ConvolutionBackwardData"));
KILN_REGISTER_KERNEL(impl<false>("cpu.onednn.convolution_backward_filter", "ConvolutionBackwardFilter"));

}  // namespace
}  // namespace kiln
