// ConvolutionBackwardData and ConvolutionBackwardFilter: the gradients of a Convolution with respect to x and w,
// as ordinary ops (their own kernels per backend). Both take the forward node's ConvolutionAttrs.
#include "ops/convolution/convolution.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// The backward ops differentiate plain NCHW convolutions: no fused epilogue, no channels_last.
Status check_plain(std::string_view op, const ConvolutionAttrs& a) {
  if (a.fused.on)
    return invalid_argument(op, " takes no fused activation (fused_activation is set): training graphs are unfused");
  if (a.channels_last) return invalid_argument(op, " is NCHW only: clear channels_last");
  if (a.channel_block > 0) return invalid_argument(op, " is NCHW only: clear channel_block");
  return Status::ok();
}

Status check_same_dtype(std::string_view op, const InferContext& ctx) {
  const DataType dt = ctx.input(0).dtype;
  if (!is_floating(dt)) return invalid_argument(op, " needs floating-point inputs, got ", dtype_name(dt));
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).dtype != dt)
      return invalid_argument(op, " input ", i, " has dtype ", dtype_name(ctx.input(i).dtype), "; expected ",
                              dtype_name(dt), " like input 0");
  return Status::ok();
}

// dy must have the dims the forward convolution of x (dims `x`) with w (dims `w`) gives.
Status check_dy(std::string_view op, const ConvolutionAttrs& a, const Dims& x, const Dims& w, const Dims& dy) {
  if (x.rank() < 3 || w.rank() != x.rank() || dy.rank() != x.rank())
    return invalid_argument(op, " needs x, w and dy of one rank >= 3, got x ", x.to_string(), ", w ", w.to_string(),
                            ", dy ", dy.to_string());
  if (a.group < 1 || (w[0] != kDynamicDim && w[0] % a.group != 0))
    return invalid_argument(op, " w of shape ", w.to_string(), " does not split into group=", a.group);
  if (x[1] != kDynamicDim && w[1] != kDynamicDim && x[1] != w[1] * a.group)
    return invalid_argument(op, " x of shape ", x.to_string(), " has ", x[1], " channels but w of shape ",
                            w.to_string(), " with group=", a.group, " expects ", w[1] * a.group);
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, w));
  Dims want = dy;
  want[0] = x[0];
  want[1] = w[0];
  for (int i = 0; i < win.rank(); ++i) want[2 + i] = win.output[i];
  if (!dims_compatible(want, dy))
    return invalid_argument(op, " dy of shape ", dy.to_string(), " must have the forward output's shape ",
                            want.to_string(), " (x ", x.to_string(), ", w ", w.to_string(), ")");
  return Status::ok();
}

OpSchema backward_data_schema() {
  OpSchema s = make_schema<ConvolutionAttrs>("ConvolutionBackwardData", "convolution",
                                             "gradient of a Convolution with respect to x: dx from dy and w "
                                             "(x is read for its shape only)");
  s.input_names = {"dy", "w", "x"};
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "ConvolutionBackwardData";
    const auto& a = ctx.attrs_as<ConvolutionAttrs>();
    KILN_RETURN_IF_ERROR(check_plain(kOp, a));
    KILN_RETURN_IF_ERROR(check_same_dtype(kOp, ctx));
    KILN_RETURN_IF_ERROR(check_dy(kOp, a, ctx.input(2).dims, ctx.input(1).dims, ctx.input(0).dims));
    return one_output(ctx.input(0).dtype, ctx.input(2).dims);
  };
  return s;
}

OpSchema backward_filter_schema() {
  OpSchema s = make_schema<ConvolutionAttrs>(
      "ConvolutionBackwardFilter", "convolution",
      "gradient of a Convolution with respect to w: dw [M, C/group, kernel...] from x and dy (kernel_shape required)");
  s.input_names = {"x", "dy"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "ConvolutionBackwardFilter";
    const auto& a = ctx.attrs_as<ConvolutionAttrs>();
    KILN_RETURN_IF_ERROR(check_plain(kOp, a));
    KILN_RETURN_IF_ERROR(check_same_dtype(kOp, ctx));
    const Dims& x = ctx.input(0).dims;
    const Dims& dy = ctx.input(1).dims;
    if (x.rank() < 3 || static_cast<int>(a.kernel_shape.size()) != x.rank() - 2)
      return invalid_argument(kOp, " needs kernel_shape with one entry per spatial axis of x ", x.to_string());
    if (dy.rank() != x.rank() || x[1] == kDynamicDim || dy[1] == kDynamicDim)
      return invalid_argument(kOp, " needs dy of x's rank and known channel counts, got x ", x.to_string(), ", dy ",
                              dy.to_string());
    if (a.group < 1 || x[1] % a.group != 0 || dy[1] % a.group != 0)
      return invalid_argument(kOp, " channels of x ", x.to_string(), " and dy ", dy.to_string(),
                              " must be divisible by group=", a.group);
    std::vector<int64_t> w{dy[1], x[1] / a.group};
    w.insert(w.end(), a.kernel_shape.begin(), a.kernel_shape.end());
    KILN_ASSIGN_OR_RETURN(const Dims wd, Dims::from(w));
    KILN_RETURN_IF_ERROR(check_dy(kOp, a, x, wd, dy));
    return one_output(ctx.input(0).dtype, wd);
  };
  return s;
}

KILN_REGISTER_OP(backward_data_schema());
KILN_REGISTER_OP(backward_filter_schema());

}  // namespace
}  // namespace kiln
