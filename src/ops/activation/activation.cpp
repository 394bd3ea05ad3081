#include "ops/activation/activation.h"

#include "ops/registry.h"

namespace kiln {

const char* enum_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kRelu: return "relu";
    case ActivationKind::kLeakyRelu: return "leaky_relu";
    case ActivationKind::kPRelu: return "prelu";
    case ActivationKind::kElu: return "elu";
    case ActivationKind::kSelu: return "selu";
    case ActivationKind::kSigmoid: return "sigmoid";
    case ActivationKind::kHardSigmoid: return "hard_sigmoid";
    case ActivationKind::kTanh: return "tanh";
    case ActivationKind::kSoftplus: return "softplus";
    case ActivationKind::kSoftsign: return "softsign";
    case ActivationKind::kClip: return "clip";
    case ActivationKind::kGelu: return "gelu";
    case ActivationKind::kSilu: return "silu";
    case ActivationKind::kHardSwish: return "hard_swish";
    case ActivationKind::kMish: return "mish";
    case ActivationKind::kThresholdedRelu: return "thresholded_relu";
    case ActivationKind::kScaledTanh: return "scaled_tanh";
    case ActivationKind::kCelu: return "celu";
  }
  return "?";
}

ActivationAttrs activation_defaults(ActivationKind kind) {
  ActivationAttrs a;
  a.kind = kind;
  switch (kind) {
    case ActivationKind::kLeakyRelu: a.alpha = 0.01f; break;
    case ActivationKind::kElu: a.alpha = 1.f; break;
    case ActivationKind::kSelu:
      a.alpha = 1.67326319217681884765625f;
      a.beta = 1.05070102214813232421875f;
      break;
    case ActivationKind::kHardSigmoid:
      a.alpha = 0.2f;
      a.beta = 0.5f;
      break;
    case ActivationKind::kClip:
      a.alpha = -3.4028234663852886e38f;
      a.beta = 3.4028234663852886e38f;
      break;
    case ActivationKind::kSilu: a.alpha = 1.f; break;
    case ActivationKind::kThresholdedRelu: a.alpha = 1.f; break;
    case ActivationKind::kScaledTanh:
      a.alpha = 1.f;
      a.beta = 1.f;
      break;
    case ActivationKind::kCelu: a.alpha = 1.f; break;
    default: break;
  }
  return a;
}

namespace {

OpSchema activation_schema() {
  OpSchema s = make_schema<ActivationAttrs>(
      "Activation", "activation", "ReLU, LeakyReLU, PReLU, ELU, SELU, sigmoids, tanh, softplus, GELU, SiLU, Mish, ...");
  s.input_names = {"x", "slope"};
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<ActivationAttrs>();
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype))
      return invalid_argument("Activation needs a floating-point input, got ", dtype_name(x.dtype));
    if (a.kind == ActivationKind::kPRelu) {
      if (!ctx.has_input(1)) return invalid_argument("PReLU needs its slope as input 1");
      KILN_ASSIGN_OR_RETURN(Dims out, broadcast_dims(x.dims, ctx.input(1).dims));
      if (out != x.dims)
        return invalid_argument("PReLU slope of shape ", ctx.input(1).dims.to_string(),
                                " must broadcast to the input shape ", x.dims.to_string());
    } else if (ctx.has_input(1)) {
      return invalid_argument("only PReLU takes a second input");
    }
    return one_output(x.dtype, x.dims);
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(activation_schema());

}  // namespace
}  // namespace kiln
