// CPU ConvolutionBackwardData and ConvolutionBackwardFilter through oneDNN's convolution backward primitives
// (data and weights) over kiln's row-major layouts (no reorders); the forward primitive descriptor is the hint
// oneDNN asks for.
#include <optional>

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

dnnl::convolution_forward::primitive_desc forward_hint(const Problem& p) {
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p.src,
                                          p.wei, p.dst, p.strides, p.dilates, p.pad_l, p.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, onednn::engine());
}

// The backward primitive of a problem and the name of oneDNN's implementation (throws dnnl::error).
template <bool kData>
dnnl::primitive make_primitive(const Problem& p, std::string& impl) {
  const auto hint = forward_hint(p);
  if constexpr (kData) {
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, p.src, p.wei, p.dst, p.strides,
                                                  p.dilates, p.pad_l, p.pad_r);
    const dnnl::convolution_backward_data::primitive_desc pd(d, onednn::engine(), hint);
    impl = pd.impl_info_str();
    return dnnl::convolution_backward_data(pd);
  } else {
    const dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, p.src, p.wei, p.dst,
                                                     p.strides, p.dilates, p.pad_l, p.pad_r);
    const dnnl::convolution_backward_weights::primitive_desc pd(d, onednn::engine(), hint);
    impl = pd.impl_info_str();
    return dnnl::convolution_backward_weights(pd);
  }
}

template <bool kData>
class OnednnConvolutionBackward final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<ConvolutionAttrs>();
    // Data: (dy, w, x) -> dx. Filter: (x, dy) -> dw.
    const Dims x = kData ? ctx.src[2].dims() : ctx.src[0].dims();
    const Dims w = kData ? ctx.src[1].dims() : ctx.dst[0].dims();
    if (!prim_ || x != x_ || w != w_) {
      KILN_ASSIGN_OR_RETURN(problem_, make_problem(a, x, w));
      KILN_RETURN_IF_ERROR(
          onednn::guard("convolution backward", [&] { prim_ = make_primitive<kData>(problem_, impl_); }));
      x_ = x;
      w_ = w;
    }
    return onednn::guard("convolution backward", [&] {
      const Problem& p = problem_;
      if constexpr (kData) {
        prim_->execute(onednn::stream(), {{DNNL_ARG_DIFF_DST, onednn::memory(p.dst, ctx.src[0])},
                                          {DNNL_ARG_WEIGHTS, onednn::memory(p.wei, ctx.src[1])},
                                          {DNNL_ARG_DIFF_SRC, onednn::memory(p.src, ctx.dst[0])}});
      } else {
        prim_->execute(onednn::stream(), {{DNNL_ARG_SRC, onednn::memory(p.src, ctx.src[0])},
                                          {DNNL_ARG_DIFF_DST, onednn::memory(p.dst, ctx.src[1])},
                                          {DNNL_ARG_DIFF_WEIGHTS, onednn::memory(p.wei, ctx.dst[0])}});
      }
      onednn::stream().wait();
    });
  }
  std::string detail() const override { return impl_; }

 private:
  Dims x_, w_;
  Problem problem_;
  std::string impl_;
  std::optional<dnnl::primitive> prim_;
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
  std::string impl;
  return onednn::guard("convolution backward", [&] { make_primitive<kData>(p, impl); });
}

template <bool kData>
KernelImpl impl(const char* name, const char* op) {
  return KernelImpl{
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 10,
      .supports = onednn_supports<kData>,
      .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<OnednnConvolutionBackward<kData>>());
      },
  };
}

KILN_REGISTER_KERNEL(impl<true>("cpu.onednn.convolution_backward_data", "ConvolutionBackwardData"));
KILN_REGISTER_KERNEL(impl<false>("cpu.onednn.convolution_backward_filter", "ConvolutionBackwardFilter"));

}  // namespace
}  // namespace kiln
