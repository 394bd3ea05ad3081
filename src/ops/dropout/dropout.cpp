#include "ops/dropout/dropout.h"

#include "ops/registry.h"

namespace kiln {
namespace {

Status check_ratio(const char* op, const DropoutAttrs& a) {
  if (!(a.ratio >= 0.f && a.ratio < 1.f))
    return invalid_argument(op, " ratio = ", a.ratio, " must be in [0, 1) (the probability of dropping an element)");
  return Status::ok();
}

OpSchema dropout_schema() {
  OpSchema s = make_schema<DropoutAttrs>(
      "Dropout", "dropout",
      "training dropout: y = x * mask / (1 - ratio), the mask a deterministic hash of (seed, step, index)");
  s.input_names = {"x", "step"};
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    KILN_RETURN_IF_ERROR(check_ratio("Dropout", ctx.attrs_as<DropoutAttrs>()));
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype)) return invalid_argument("Dropout needs a floating-point x, got ", dtype_name(x.dtype));
    if (ctx.has_input(1)) {
      const TensorDesc& step = ctx.input(1);
      if ((step.dtype != DataType::kInt64 && step.dtype != DataType::kInt32) || step.dims.rank() != 0)
        return invalid_argument("Dropout step (input 1) must be an int32 or int64 scalar, got ", step.to_string());
    }
    return std::vector<TensorDesc>{{x.dtype, x.dims, true}, {DataType::kBool, x.dims, true}};
  };
  // Two Dropout nodes on one x draw independent masks only when they stay two nodes.
  s.deterministic = false;
  return s;
}

OpSchema dropout_backward_schema() {
  OpSchema s = make_schema<DropoutAttrs>("DropoutBackward", "dropout",
                                         "gradient of Dropout: dx = dy * mask / (1 - ratio) (dy where not training)");
  s.input_names = {"dy", "mask"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    KILN_RETURN_IF_ERROR(check_ratio("DropoutBackward", ctx.attrs_as<DropoutAttrs>()));
    const TensorDesc& dy = ctx.input(0);
    const TensorDesc& mask = ctx.input(1);
    if (!is_floating(dy.dtype))
      return invalid_argument("DropoutBackward needs a floating-point dy, got ", dtype_name(dy.dtype));
    if (mask.dtype != DataType::kBool || !dims_compatible(mask.dims, dy.dims))
      return invalid_argument("DropoutBackward mask ", mask.to_string(), " must be bool with dy's shape ",
                              dy.dims.to_string());
    return one_output(dy.dtype, dy.dims);
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(dropout_schema());
KILN_REGISTER_OP(dropout_backward_schema());

}  // namespace
}  // namespace kiln
