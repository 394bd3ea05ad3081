// Gradient rules of Convolution (dx through ConvolutionBackwardData, dw through ConvolutionBackwardFilter) and
// Deconvolution (its adjoint: dx = Convolution(dy, w), dw = ConvolutionBackwardFilter(dy, x)); db sums dy over the
// batch and spatial axes.
#include "ops/convolution/convolution.h"
#include "ops/grad.h"
#include "ops/reduce/reduce.h"

namespace kiln {
namespace {

// db: dy summed over every axis but 1.
Status bias_grad(GradBuilder& b, GradValue dy) {
  if (b.num_inputs() <= 2 || !b.input(2).valid() || !b.needs_grad(2)) return Status::ok();
  auto sum = std::make_unique<ReduceAttrs>();
  sum->op = ReduceOp::kSum;
  sum->keep_dims = false;
  sum->axes.push_back(0);
  for (int i = 2; i < b.desc(dy).dims.rank(); ++i) sum->axes.push_back(i);
  KILN_ASSIGN_OR_RETURN(GradValue db, b.add1("Reduce", std::move(sum), {dy}));
  return b.set_grad(2, db);
}

Status convolution_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<ConvolutionAttrs>();
  const bool residual = b.num_inputs() > 3 && b.input(3).valid();
  if (has_conv_epilogue(a, residual))
    return unsupported("this Convolution carries a fused ", a.fused.on ? "activation" : "residual add",
                       " (an optimizer fusion), which has no gradient: differentiate the model graph before "
                       "optimizing it (training graphs are unfused)");
  if (a.channels_last || a.channel_block > 0)
    return unsupported("this Convolution is ",
                       a.channels_last ? "channels_last (set by the layout-nhwc pass)"
                                       : "in channel blocks (set by the layout-blocked pass)",
                       ", which has no gradient: "
                       "differentiate the model graph before optimizing it");
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const GradValue x = b.input(0), w = b.input(1);
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue dx,
                          b.add1("ConvolutionBackwardData", std::make_unique<ConvolutionAttrs>(a), {dy, w, x}));
    KILN_RETURN_IF_ERROR(b.set_grad(0, dx));
  }
  if (b.needs_grad(1)) {
    const Dims wd = b.desc(w).dims;
    auto attrs = std::make_unique<ConvolutionAttrs>(a);
    attrs->kernel_shape.assign(wd.begin() + 2, wd.end());
    for (int64_t k : attrs->kernel_shape)
      if (k == kDynamicDim)
        return unsupported("the weights w of shape ", wd.to_string(),
                           " have a dynamic kernel size; a trained convolution needs static weight dims");
    KILN_ASSIGN_OR_RETURN(GradValue dw, b.add1("ConvolutionBackwardFilter", std::move(attrs), {x, dy}));
    KILN_RETURN_IF_ERROR(b.set_grad(1, dw));
  }
  return bias_grad(b, dy);
}

// Deconvolution is the adjoint of a Convolution of its output (dy, M channels) to its input (C channels) with the
// same window and weights [C, M/group, k...]: dx = Convolution(dy, w), dw = ConvolutionBackwardFilter(dy, x).
Status deconvolution_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<DeconvolutionAttrs>();
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const GradValue x = b.input(0), w = b.input(1);
  const Dims xd = b.desc(x).dims, wd = b.desc(w).dims;
  KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(a, xd, wd));
  ConvolutionAttrs conv;
  conv.strides = win.strides;
  conv.dilations = win.dilations;
  conv.group = a.group;
  conv.pads = win.pads_begin;
  conv.pads.insert(conv.pads.end(), win.pads_end.begin(), win.pads_end.end());
  for (int i = 0; i < win.rank(); ++i) {
    if (win.pads_begin[i] < 0 || win.pads_end[i] < 0)
      return unsupported("this Deconvolution has negative pads on spatial axis ", i,
                         " (output_shape beyond the full output), which have no gradient in kiln");
    if (xd[2 + i] == kDynamicDim || b.desc(dy).dims[2 + i] == kDynamicDim)
      return unsupported("this Deconvolution has a dynamic spatial input size; its gradient needs static ones");
    const int64_t padded = b.desc(dy).dims[2 + i] + win.pads_begin[i] + win.pads_end[i];
    if (padded < win.extent(i) || (padded - win.extent(i)) / win.strides[i] + 1 != xd[2 + i])
      return unsupported("this Deconvolution's output_padding on spatial axis ", i,
                         " is not smaller than its stride, which has no gradient in kiln");
  }
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1("Convolution", std::make_unique<ConvolutionAttrs>(conv), {dy, w}));
    KILN_RETURN_IF_ERROR(b.set_grad(0, dx));
  }
  if (b.needs_grad(1)) {
    auto attrs = std::make_unique<ConvolutionAttrs>(conv);
    attrs->kernel_shape = win.kernel;
    KILN_ASSIGN_OR_RETURN(GradValue dw, b.add1("ConvolutionBackwardFilter", std::move(attrs), {dy, x}));
    KILN_RETURN_IF_ERROR(b.set_grad(1, dw));
  }
  return bias_grad(b, dy);
  return Status::ok();
}

KILN_REGISTER_GRAD("Convolution", convolution_grad);
KILN_REGISTER_GRAD("Deconvolution", deconvolution_grad);

}  // namespace
}  // namespace kiln
