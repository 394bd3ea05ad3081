// BatchNormalizationTraining and the backward ops of batch, layer and instance normalization and LRN, with the
// gradient rules of BatchNormalization (running statistics), BatchNormalizationTraining (batch statistics),
// LayerNormalization, InstanceNormalization and LRN.
#include <cmath>

#include "ops/grad.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"
#include "ops/registry.h"

namespace kiln {
namespace {

Status floating_input(const InferContext& ctx, int i, const char* op, const char* name) {
  if (!ctx.has_input(i)) return invalid_argument(op, " needs input ", i, " (", name, ")");
  if (!is_floating(ctx.input(i).dtype))
    return invalid_argument(op, " ", name, " (input ", i, ") must be floating-point, got ",
                            dtype_name(ctx.input(i).dtype));
  return Status::ok();
}

// Input i: floating, shape [channels].
Status per_channel(const InferContext& ctx, int i, const char* op, const char* name, int64_t channels) {
  KILN_RETURN_IF_ERROR(floating_input(ctx, i, op, name));
  const Dims& d = ctx.input(i).dims;
  if (d.rank() != 1 || (d[0] != channels && d[0] != kDynamicDim && channels != kDynamicDim))
    return invalid_argument(op, " ", name, " must have shape [", channels, "] (the channel count, dim 1 of x) but has ",
                            d.to_string());
  return Status::ok();
}

Status check_x(const InferContext& ctx, int i, const char* op) {
  KILN_RETURN_IF_ERROR(floating_input(ctx, i, op, "x"));
  if (ctx.input(i).dims.rank() < 2)
    return invalid_argument(op, " x must have rank >= 2 (N, C, ...) but has shape ", ctx.input(i).dims.to_string());
  return Status::ok();
}

Status check_dy(const InferContext& ctx, const char* op) {
  KILN_RETURN_IF_ERROR(floating_input(ctx, 0, op, "dy"));
  const TensorDesc& dy = ctx.input(0);
  const TensorDesc& x = ctx.input(1);
  if (dy.dtype != x.dtype || !dims_compatible(dy.dims, x.dims))
    return invalid_argument(op, " dy ", dy.to_string(), " must have x's dtype and shape ", x.to_string());
  return Status::ok();
}

Status check_epsilon(float epsilon, const char* op) {
  if (!(epsilon >= 0.f) || std::isinf(epsilon))
    return invalid_argument(op, " epsilon = ", epsilon, " must be a finite value >= 0");
  return Status::ok();
}

OpSchema batch_norm_training_schema() {
  OpSchema s = make_schema<BatchNormalizationTrainingAttrs>(
      "BatchNormalizationTraining", "normalization",
      "training batch norm: batch statistics, updated running statistics, saved mean and inverse std for the backward");
  s.input_names = {"x", "scale", "bias", "running_mean", "running_var"};
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr const char* kOp = "BatchNormalizationTraining";
    const auto& a = ctx.attrs_as<BatchNormalizationTrainingAttrs>();
    KILN_RETURN_IF_ERROR(check_epsilon(a.epsilon, kOp));
    if (!(a.momentum >= 0.f && a.momentum <= 1.f))
      return invalid_argument(kOp, " momentum = ", a.momentum, " must be in [0, 1] (the running statistics' weight)");
    KILN_RETURN_IF_ERROR(check_x(ctx, 0, kOp));
    const Dims& x = ctx.input(0).dims;
    const char* names[] = {"scale", "bias", "running_mean", "running_var"};
    for (int i = 1; i <= 4; ++i) KILN_RETURN_IF_ERROR(per_channel(ctx, i, kOp, names[i - 1], x[1]));
    const Dims c{x[1]};
    return std::vector<TensorDesc>{{ctx.input(0).dtype, x, true},
                                   {ctx.input(3).dtype, c, true},
                                   {ctx.input(4).dtype, c, true},
                                   {DataType::kFloat32, c, true},
                                   {DataType::kFloat32, c, true}};
  };
  s.deterministic = true;
  return s;
}

OpSchema batch_norm_backward_schema() {
  OpSchema s = make_schema<BatchNormalizationBackwardAttrs>(
      "BatchNormalizationBackward", "normalization",
      "gradient of batch norm: dx, dscale, dbias from batch statistics (training) or running ones (+ dmean, dvar)");
  s.input_names = {"dy", "x", "scale", "mean", "stat"};
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr const char* kOp = "BatchNormalizationBackward";
    const auto& a = ctx.attrs_as<BatchNormalizationBackwardAttrs>();
    KILN_RETURN_IF_ERROR(check_epsilon(a.epsilon, kOp));
    KILN_RETURN_IF_ERROR(check_x(ctx, 1, kOp));
    KILN_RETURN_IF_ERROR(check_dy(ctx, kOp));
    const Dims& x = ctx.input(1).dims;
    KILN_RETURN_IF_ERROR(per_channel(ctx, 2, kOp, "scale", x[1]));
    KILN_RETURN_IF_ERROR(per_channel(ctx, 3, kOp, "mean", x[1]));
    KILN_RETURN_IF_ERROR(per_channel(ctx, 4, kOp, a.global_stats ? "var" : "inv_std", x[1]));
    const Dims c{x[1]};
    std::vector<TensorDesc> out{
        {ctx.input(1).dtype, x, true}, {ctx.input(2).dtype, c, true}, {ctx.input(2).dtype, c, true}};
    if (a.global_stats) {
      out.push_back({ctx.input(3).dtype, c, true});
      out.push_back({ctx.input(4).dtype, c, true});
    }
    return out;
  };
  return s;
}

OpSchema layer_norm_backward_schema() {
  OpSchema s = make_schema<LayerNormalizationAttrs>(
      "LayerNormalizationBackward", "normalization",
      "gradient of layer norm: dx, and dscale over the normalized dims (x.dims[axis:]) summed over the others");
  s.input_names = {"dy", "x", "scale"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr const char* kOp = "LayerNormalizationBackward";
    const auto& a = ctx.attrs_as<LayerNormalizationAttrs>();
    KILN_RETURN_IF_ERROR(check_epsilon(a.epsilon, kOp));
    KILN_RETURN_IF_ERROR(floating_input(ctx, 1, kOp, "x"));
    KILN_RETURN_IF_ERROR(check_dy(ctx, kOp));
    const Dims& x = ctx.input(1).dims;
    auto axis = normalize_axis(a.axis, x.rank());
    if (!axis) return invalid_argument(kOp, " axis: ", axis.status().message());
    Dims norm;
    for (int j = *axis; j < x.rank(); ++j) norm.push_back(x[j]);
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(floating_input(ctx, 2, kOp, "scale"));
      auto both = broadcast_dims(norm, ctx.input(2).dims);
      if (!both || *both != norm)
        return invalid_argument(kOp, " scale of shape ", ctx.input(2).dims.to_string(),
                                " must broadcast to the normalized dims ", norm.to_string());
    }
    return std::vector<TensorDesc>{{ctx.input(1).dtype, x, true}, {ctx.input(1).dtype, norm, true}};
  };
  return s;
}

OpSchema instance_norm_backward_schema() {
  OpSchema s = make_schema<InstanceNormalizationAttrs>(
      "InstanceNormalizationBackward", "normalization",
      "gradient of instance norm: dx, dscale and dbias ([C]) from dy, x and scale");
  s.input_names = {"dy", "x", "scale"};
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr const char* kOp = "InstanceNormalizationBackward";
    KILN_RETURN_IF_ERROR(check_epsilon(ctx.attrs_as<InstanceNormalizationAttrs>().epsilon, kOp));
    KILN_RETURN_IF_ERROR(check_x(ctx, 1, kOp));
    KILN_RETURN_IF_ERROR(check_dy(ctx, kOp));
    const Dims& x = ctx.input(1).dims;
    KILN_RETURN_IF_ERROR(per_channel(ctx, 2, kOp, "scale", x[1]));
    const Dims c{x[1]};
    return std::vector<TensorDesc>{
        {ctx.input(1).dtype, x, true}, {ctx.input(2).dtype, c, true}, {ctx.input(2).dtype, c, true}};
  };
  return s;
}

OpSchema lrn_backward_schema() {
  OpSchema s = make_schema<LrnAttrs>("LRNBackward", "normalization",
                                     "gradient of LRN (across channels) from dy and the forward input x");
  s.input_names = {"dy", "x"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr const char* kOp = "LRNBackward";
    const auto& a = ctx.attrs_as<LrnAttrs>();
    KILN_RETURN_IF_ERROR(check_x(ctx, 1, kOp));
    KILN_RETURN_IF_ERROR(check_dy(ctx, kOp));
    if (a.size < 1 || a.size > (int64_t{1} << 20)) return invalid_argument(kOp, " size = ", a.size, " must be >= 1");
    if (!std::isfinite(a.alpha) || !std::isfinite(a.beta) || !std::isfinite(a.bias))
      return invalid_argument(kOp, " alpha, beta and bias must be finite, got ", a.alpha, ", ", a.beta, ", ", a.bias);
    return one_output(ctx.input(1).dtype, ctx.input(1).dims);
  };
  return s;
}

KILN_REGISTER_OP(batch_norm_training_schema());
KILN_REGISTER_OP(instance_norm_backward_schema());
KILN_REGISTER_OP(lrn_backward_schema());
KILN_REGISTER_OP(batch_norm_backward_schema());
KILN_REGISTER_OP(layer_norm_backward_schema());

// Gradients reaching statistics outputs (running or saved) are refused: they are state, not activations.
Status refuse_stat_grads(GradBuilder& b, const char* op) {
  for (int i = 1; i < b.num_outputs(); ++i)
    if (b.grad_output(i))
      return unsupported(op, " output ", i,
                         " (a statistic) is used by the loss, which kiln does not differentiate: the loss may depend "
                         "on output 0 only");
  return Status::ok();
}

Status batch_norm_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  bool any = false;
  for (int i = 0; i < 5; ++i) any |= b.needs_grad(i);
  if (!dy || !any) return Status::ok();
  auto attrs = std::make_unique<BatchNormalizationBackwardAttrs>();
  attrs->epsilon = b.attrs_as<BatchNormalizationAttrs>().epsilon;
  attrs->global_stats = true;
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> g, b.add("BatchNormalizationBackward", std::move(attrs),
                                                        {dy, b.input(0), b.input(1), b.input(3), b.input(4)}));
  // Outputs dx, dscale, dbias, dmean, dvar for inputs x, scale, bias, mean, var.
  for (int i = 0; i < 5; ++i)
    if (b.needs_grad(i)) KILN_RETURN_IF_ERROR(b.set_grad(i, g[i]));
  return Status::ok();
}

Status batch_norm_training_grad(GradBuilder& b) {
  KILN_RETURN_IF_ERROR(refuse_stat_grads(b, "BatchNormalizationTraining"));
  const GradValue dy = b.grad_output(0);
  if (!dy || !(b.needs_grad(0) || b.needs_grad(1) || b.needs_grad(2))) return Status::ok();
  auto attrs = std::make_unique<BatchNormalizationBackwardAttrs>();
  attrs->epsilon = b.attrs_as<BatchNormalizationTrainingAttrs>().epsilon;
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> g, b.add("BatchNormalizationBackward", std::move(attrs),
                                                        {dy, b.input(0), b.input(1), b.output(3), b.output(4)}));
  for (int i = 0; i < 3; ++i)
    if (b.needs_grad(i)) KILN_RETURN_IF_ERROR(b.set_grad(i, g[i]));
  return Status::ok();
}

Status layer_norm_grad(GradBuilder& b) {
  KILN_RETURN_IF_ERROR(refuse_stat_grads(b, "LayerNormalization"));
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const bool has_scale = b.num_inputs() > 1 && b.input(1).valid();
  const bool has_bias = b.num_inputs() > 2 && b.input(2).valid();
  if (b.needs_grad(0) || (has_scale && b.needs_grad(1))) {
    auto attrs = std::make_unique<LayerNormalizationAttrs>(b.attrs_as<LayerNormalizationAttrs>());
    attrs->return_stats = false;
    std::vector<GradValue> in{dy, b.input(0)};
    if (has_scale) in.push_back(b.input(1));
    KILN_ASSIGN_OR_RETURN(std::vector<GradValue> g, b.add("LayerNormalizationBackward", std::move(attrs), in));
    if (b.needs_grad(0)) KILN_RETURN_IF_ERROR(b.set_grad(0, g[0]));
    if (has_scale && b.needs_grad(1)) {
      KILN_ASSIGN_OR_RETURN(GradValue ds, b.sum_to(g[1], b.desc(b.input(1)).dims));
      KILN_RETURN_IF_ERROR(b.set_grad(1, ds));
    }
  }
  if (has_bias && b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue db, b.sum_to(dy, b.desc(b.input(2)).dims));
    KILN_RETURN_IF_ERROR(b.set_grad(2, db));
  }
  return Status::ok();
}

Status instance_norm_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !(b.needs_grad(0) || b.needs_grad(1) || b.needs_grad(2))) return Status::ok();
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> g,
                        b.add("InstanceNormalizationBackward",
                              std::make_unique<InstanceNormalizationAttrs>(b.attrs_as<InstanceNormalizationAttrs>()),
                              {dy, b.input(0), b.input(1)}));
  for (int i = 0; i < 3; ++i)
    if (b.needs_grad(i)) KILN_RETURN_IF_ERROR(b.set_grad(i, g[i]));
  return Status::ok();
}

Status lrn_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue dx,
                        b.add1("LRNBackward", std::make_unique<LrnAttrs>(b.attrs_as<LrnAttrs>()), {dy, b.input(0)}));
  return b.set_grad(0, dx);
}

KILN_REGISTER_GRAD("BatchNormalization", batch_norm_grad);
KILN_REGISTER_GRAD("InstanceNormalization", instance_norm_grad);
KILN_REGISTER_GRAD("LRN", lrn_grad);
KILN_REGISTER_GRAD("BatchNormalizationTraining", batch_norm_training_grad);
KILN_REGISTER_GRAD("LayerNormalization", layer_norm_grad);

}  // namespace
}  // namespace kiln
