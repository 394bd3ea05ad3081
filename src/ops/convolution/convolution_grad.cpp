// Gradient rule of Convolution: dx through ConvolutionBackwardData, dw through ConvolutionBackwardFilter,
// db as the sum of dy over the batch and spatial axes.
#include "ops/convolution/convolution.h"
#include "ops/grad.h"
#include "ops/reduce/reduce.h"

namespace kiln {
namespace {

Status convolution_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<ConvolutionAttrs>();
  const bool residual = b.num_inputs() > 3 && b.input(3).valid();
  if (has_conv_epilogue(a, residual))
    return unsupported("this Convolution carries a fused ", a.fused.on ? "activation" : "residual add",
                       " (an optimizer fusion), which has no gradient: differentiate the model graph before "
                       "optimizing it (training graphs are unfused)");
  if (a.channels_last)
    return unsupported(
        "this Convolution is channels_last (set by the layout-nhwc pass), which has no gradient: "
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
  if (b.num_inputs() > 2 && b.input(2).valid() && b.needs_grad(2)) {
    auto sum = std::make_unique<ReduceAttrs>();
    sum->op = ReduceOp::kSum;
    sum->keep_dims = false;
    sum->axes.push_back(0);
    for (int i = 2; i < b.desc(dy).dims.rank(); ++i) sum->axes.push_back(i);
    KILN_ASSIGN_OR_RETURN(GradValue db, b.add1("Reduce", std::move(sum), {dy}));
    KILN_RETURN_IF_ERROR(b.set_grad(2, db));
  }
  return Status::ok();
}

KILN_REGISTER_GRAD("Convolution", convolution_grad);

}  // namespace
}  // namespace kiln
