// kiln Activation -> the ONNX activation ops.
#include "ops/activation/activation.h"
#include "onnx/exporter.h"

namespace kiln::onnx_export {
namespace {

Status export_activation(ExportContext& ctx, const Node& node) {
  const auto& a = static_cast<const ActivationAttrs&>(*node.attrs);
  const auto in = input_names(ctx, node);
  const auto out = output_names(ctx, node);
  auto simple = [&](const char* op) -> onnx::NodeProto& { return ctx.add_node(op, {in[0]}, out, node.name); };
  switch (a.kind) {
    case ActivationKind::kRelu: simple("Relu"); break;
    case ActivationKind::kLeakyRelu: set_attr(simple("LeakyRelu"), "alpha", a.alpha); break;
    case ActivationKind::kPRelu: ctx.add_node("PRelu", in, out, node.name); break;
    case ActivationKind::kElu: set_attr(simple("Elu"), "alpha", a.alpha); break;
    case ActivationKind::kSelu: {
      auto& n = simple("Selu");
      set_attr(n, "alpha", a.alpha);
      set_attr(n, "gamma", a.beta);
      break;
    }
    case ActivationKind::kSigmoid: simple("Sigmoid"); break;
    case ActivationKind::kHardSigmoid: {
      auto& n = simple("HardSigmoid");
      set_attr(n, "alpha", a.alpha);
      set_attr(n, "beta", a.beta);
      break;
    }
    case ActivationKind::kTanh: simple("Tanh"); break;
    case ActivationKind::kSoftplus: simple("Softplus"); break;
    case ActivationKind::kSoftsign: simple("Softsign"); break;
    case ActivationKind::kClip: {
      Tensor lo = *Tensor::empty(node.inputs[0]->dtype, {}), hi = *Tensor::empty(node.inputs[0]->dtype, {});
      lo.set(0, a.alpha);
      hi.set(0, a.beta);
      ctx.add_node("Clip",
                   {in[0], ctx.add_initializer(node.name + "/min", lo), ctx.add_initializer(node.name + "/max", hi)},
                   out, node.name);
      break;
    }
    case ActivationKind::kHardSwish: simple("HardSwish"); break;
    case ActivationKind::kThresholdedRelu: set_attr(simple("ThresholdedRelu"), "alpha", a.alpha); break;
    case ActivationKind::kCelu: set_attr(simple("Celu"), "alpha", a.alpha); break;
    case ActivationKind::kMish:  // opset 18: x * tanh(softplus(x))
    case ActivationKind::kSilu:  // x * sigmoid(alpha * x)
    case ActivationKind::kGelu:
    case ActivationKind::kScaledTanh: {
      const std::string& x = in[0];
      std::string inner = x;
      if (a.kind == ActivationKind::kSilu && a.alpha != 1.f) {
        Tensor s = *Tensor::empty(node.inputs[0]->dtype, {});
        s.set(0, a.alpha);
        inner = ctx.fresh_name(node.name + "/ax");
        ctx.add_node("Mul", {x, ctx.add_initializer(node.name + "/alpha", s)}, {inner}, node.name + "/scale");
      }
      if (a.kind == ActivationKind::kSilu || a.kind == ActivationKind::kMish) {
        const std::string g = ctx.fresh_name(node.name + "/gate");
        if (a.kind == ActivationKind::kSilu) {
          ctx.add_node("Sigmoid", {inner}, {g}, node.name + "/sigmoid");
        } else {
          const std::string sp = ctx.fresh_name(node.name + "/softplus");
          ctx.add_node("Softplus", {x}, {sp}, node.name + "/softplus");
          ctx.add_node("Tanh", {sp}, {g}, node.name + "/tanh");
        }
        ctx.add_node("Mul", {x, g}, out, node.name);
        break;
      }
      return unsupported("ONNX opset 17 has no ", enum_name(a.kind), " activation");
    }
  }
  return Status::ok();
}

KILN_REGISTER_ONNX_EXPORTER("Activation", export_activation);

}  // namespace
}  // namespace kiln::onnx_export
