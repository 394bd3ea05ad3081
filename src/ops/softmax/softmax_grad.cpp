// SoftmaxBackward (dx = y * (dy - sum(dy * y))) and LogSoftmaxBackward (dx = dy - exp(y) * sum(dy)), the sums
// over the forward's axis (or the axes from it on with coerce_2d), and the gradient rules of Softmax and LogSoftmax.
#include "ops/grad.h"
#include "ops/registry.h"
#include "ops/softmax/softmax.h"

namespace kiln {
namespace {

OpSchema softmax_backward_schema(const char* name, const char* summary) {
  OpSchema s = make_schema<SoftmaxAttrs>(name, "softmax", summary);
  s.input_names = {"dy", "y"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [name = std::string(name)](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<SoftmaxAttrs>();
    const TensorDesc& dy = ctx.input(0);
    const TensorDesc& y = ctx.input(1);
    if (!is_floating(y.dtype) || dy.dtype != y.dtype)
      return invalid_argument(name, " needs floating-point dy and y of one dtype, got ", dtype_name(dy.dtype), " and ",
                              dtype_name(y.dtype));
    if (!dims_compatible(dy.dims, y.dims))
      return invalid_argument(name, " dy of shape ", dy.dims.to_string(), " must have y's shape ", y.dims.to_string());
    const int r = y.dims.rank();
    if (r == 0) return invalid_argument(name, " needs y of rank >= 1 but got a scalar");
    if (a.axis < -r || a.axis >= r)
      return invalid_argument(name, " axis ", a.axis, " is out of range for y of shape ", y.dims.to_string());
    return one_output(y.dtype, y.dims);
  };
  return s;
}

KILN_REGISTER_OP(softmax_backward_schema("SoftmaxBackward",
                                         "gradient of Softmax from dy and its output y: y * (dy - sum(dy * y))"));
KILN_REGISTER_OP(softmax_backward_schema("LogSoftmaxBackward",
                                         "gradient of LogSoftmax from dy and its output y: dy - exp(y) * sum(dy)"));

template <bool kLog>
Status softmax_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue dx,
                        b.add1(kLog ? "LogSoftmaxBackward" : "SoftmaxBackward",
                               std::make_unique<SoftmaxAttrs>(b.attrs_as<SoftmaxAttrs>()), {dy, b.output(0)}));
  return b.set_grad(0, dx);
}

KILN_REGISTER_GRAD("Softmax", softmax_grad<false>);
KILN_REGISTER_GRAD("LogSoftmax", softmax_grad<true>);

}  // namespace
}  // namespace kiln
