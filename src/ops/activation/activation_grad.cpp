// ActivationBackward (dx = dy * f'(x); for PReLU also the slope's gradient per element of x) and the gradient
// rule of Activation.
#include "ops/activation/activation.h"
#include "ops/grad.h"
#include "ops/registry.h"

namespace kiln {
namespace {

OpSchema activation_backward_schema() {
  OpSchema s = make_schema<ActivationAttrs>("ActivationBackward", "activation",
                                            "gradient of an activation: dx = dy * f'(x); PReLU adds a second output dy "
                                            "* min(x, 0) (x's shape) for the slope");
  s.input_names = {"dy", "x", "slope"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<ActivationAttrs>();
    const TensorDesc& dy = ctx.input(0);
    const TensorDesc& x = ctx.input(1);
    if (!is_floating(x.dtype) || dy.dtype != x.dtype)
      return invalid_argument("ActivationBackward needs floating-point dy and x of one dtype, got ",
                              dtype_name(dy.dtype), " and ", dtype_name(x.dtype));
    if (!dims_compatible(dy.dims, x.dims))
      return invalid_argument("ActivationBackward dy of shape ", dy.dims.to_string(), " must have x's shape ",
                              x.dims.to_string());
    std::vector<TensorDesc> out = one_output(x.dtype, x.dims);
    if (a.kind == ActivationKind::kPRelu) {
      if (!ctx.has_input(2)) return invalid_argument("ActivationBackward of PReLU needs the slope as input 2");
      if (ctx.input(2).dtype != x.dtype)
        return invalid_argument("ActivationBackward slope has dtype ", dtype_name(ctx.input(2).dtype), "; expected ",
                                dtype_name(x.dtype));
      KILN_ASSIGN_OR_RETURN(Dims both, broadcast_dims(x.dims, ctx.input(2).dims));
      if (both != x.dims)
        return invalid_argument("ActivationBackward slope of shape ", ctx.input(2).dims.to_string(),
                                " must broadcast to x's shape ", x.dims.to_string());
      out.push_back(out[0]);
    } else if (ctx.has_input(2)) {
      return invalid_argument("ActivationBackward takes a slope (input 2) only for PReLU");
    }
    return out;
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(activation_backward_schema());

Status activation_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<ActivationAttrs>();
  const GradValue dy = b.grad_output(0);
  const bool prelu = a.kind == ActivationKind::kPRelu;
  const bool slope_grad = prelu && b.needs_grad(1);
  if (!dy || !(b.needs_grad(0) || slope_grad)) return Status::ok();
  std::vector<GradValue> in{dy, b.input(0)};
  if (prelu) in.push_back(b.input(1));
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> g,
                        b.add("ActivationBackward", std::make_unique<ActivationAttrs>(a), std::move(in)));
  if (b.needs_grad(0)) KILN_RETURN_IF_ERROR(b.set_grad(0, g[0]));
  if (slope_grad) {
    KILN_ASSIGN_OR_RETURN(GradValue ds, b.sum_to(g[1], b.desc(b.input(1)).dims));
    KILN_RETURN_IF_ERROR(b.set_grad(1, ds));
  }
  return Status::ok();
}

KILN_REGISTER_GRAD("Activation", activation_grad);

}  // namespace
}  // namespace kiln
