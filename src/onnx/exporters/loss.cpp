// kiln NLLLoss -> ONNX NegativeLogLikelihoodLoss; CrossEntropyLoss -> SoftmaxCrossEntropyLoss (class-index
// targets without label smoothing: what ONNX defines).
#include <limits>

#include "onnx/exporter.h"
#include "ops/loss/loss.h"

namespace kiln::onnx_export {
namespace {

template <class A>
Status export_class_loss(ExportContext& ctx, const Node& node, const char* onnx_op) {
  const auto& a = static_cast<const A&>(*node.attrs);
  if (node.inputs[0]->dims.rank() < 2)
    return unsupported("ONNX ", onnx_op, " needs an input of shape [N, C, ...], not the unbatched ",
                       node.inputs[0]->dims.to_string());
  if (is_floating(node.inputs[1]->dtype))
    return unsupported("ONNX ", onnx_op, " takes class indices, not class probabilities");
  if constexpr (requires { a.label_smoothing; }) {
    if (a.label_smoothing != 0) return unsupported("ONNX ", onnx_op, " has no label smoothing");
  }
  auto& n = ctx.add_node(onnx_op, input_names(ctx, node), output_names(ctx, node), node.name);
  set_attr(n, "reduction", std::string(enum_name(a.reduction)));
  if (a.ignore_index != std::numeric_limits<int64_t>::min()) set_attr(n, "ignore_index", a.ignore_index);
  return Status::ok();
}

KILN_REGISTER_ONNX_EXPORTER("NLLLoss", [](ExportContext& ctx, const Node& node) {
  return export_class_loss<NLLLossAttrs>(ctx, node, "NegativeLogLikelihoodLoss");
});
KILN_REGISTER_ONNX_EXPORTER("CrossEntropyLoss", [](ExportContext& ctx, const Node& node) {
  return export_class_loss<CrossEntropyLossAttrs>(ctx, node, "SoftmaxCrossEntropyLoss");
});

}  // namespace
}  // namespace kiln::onnx_export
