// PoolingBackward (dx from dy and the forward input x; max pooling recomputes each window's first maximum) and
// the gradient rule of Pooling.
#include "ops/grad.h"
#include "ops/pooling/pooling.h"
#include "ops/registry.h"

namespace kiln {
namespace {

OpSchema pooling_backward_schema() {
  OpSchema s = make_schema<PoolingAttrs>(
      "PoolingBackward", "pooling",
      "gradient of max, average and Lp pooling with respect to x: dx from dy and x (the forward's attributes)");
  s.input_names = {"dy", "x"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<PoolingAttrs>();
    const TensorDesc& dy = ctx.input(0);
    const TensorDesc& x = ctx.input(1);
    if (!is_floating(x.dtype) || dy.dtype != x.dtype)
      return invalid_argument("PoolingBackward needs floating-point dy and x of one dtype, got ", dtype_name(dy.dtype),
                              " and ", dtype_name(x.dtype));
    if (a.channels_last) return invalid_argument("PoolingBackward is NCHW only: clear channels_last");
    KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x.dims));
    Dims want = x.dims;
    for (int i = 0; i < g.spatial; ++i) want[i + 2] = g.out[i];
    if (!dims_compatible(want, dy.dims))
      return invalid_argument("PoolingBackward dy of shape ", dy.dims.to_string(),
                              " must have the pooling output's shape ", want.to_string(), " for x ",
                              x.dims.to_string());
    return one_output(x.dtype, x.dims);
  };
  return s;
}

KILN_REGISTER_OP(pooling_backward_schema());

Status pooling_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<PoolingAttrs>();
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  if (a.channels_last)
    return unsupported(
        "this Pooling is channels_last (set by the layout-nhwc pass), which has no gradient: "
        "differentiate the model graph before optimizing it");
  auto attrs = std::make_unique<PoolingAttrs>(a);
  attrs->return_indices = false;
  KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1("PoolingBackward", std::move(attrs), {dy, b.input(0)}));
  return b.set_grad(0, dx);
}

KILN_REGISTER_GRAD("Pooling", pooling_grad);

}  // namespace
}  // namespace kiln
