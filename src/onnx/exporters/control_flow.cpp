// kiln If, Loop, Scan, SequenceMap (with their graphs) and the sequence and optional ops -> ONNX.
#include "ops/control_flow/control_flow.h"
#include "onnx/exporter.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_export {
namespace {

// The node with its first `formal` inputs (the captures after them are implicit in ONNX) and its graphs.
Status with_graphs(ExportContext& ctx, const Node& node, size_t formal, onnx::NodeProto** out = nullptr) {
  std::vector<std::string> ins;
  for (size_t i = 0; i < formal && i < node.inputs.size(); ++i) ins.push_back(ctx.name(node.inputs[i]));
  auto& n = ctx.add_node(node.op(), ins, output_names(ctx, node), node.name);
  for (const Subgraph& sub : node.subgraphs) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(sub.name);
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(node.name + "/" + sub.name);
    Status s = export_graph(*sub.graph, *a->mutable_g());
    if (!s.is_ok()) return subgraph_error(node, sub.name, s);
  }
  if (out) *out = &n;
  return Status::ok();
}

size_t body_inputs(const Node& node) { return node.subgraphs.at(0).graph->inputs().size(); }

Status same_name(ExportContext& ctx, const Node& node) {
  ctx.add_node(node.op(), input_names(ctx, node), output_names(ctx, node), node.name);
  return Status::ok();
}

KILN_REGISTER_ONNX_EXPORTER("If", [](ExportContext& ctx, const Node& node) { return with_graphs(ctx, node, 1); });
KILN_REGISTER_ONNX_EXPORTER("Loop", [](ExportContext& ctx, const Node& node) {
  return with_graphs(ctx, node, body_inputs(node));
});
KILN_REGISTER_ONNX_EXPORTER("SequenceMap", [](ExportContext& ctx, const Node& node) {
  return with_graphs(ctx, node, body_inputs(node));
});
KILN_REGISTER_ONNX_EXPORTER("Scan", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const ScanAttrs&>(*node.attrs);
  onnx::NodeProto* n = nullptr;
  KILN_RETURN_IF_ERROR(with_graphs(ctx, node, body_inputs(node) + (a.batched ? 1 : 0), &n));
  if (a.batched) return unsupported("Scan of opset 8 (batched) cannot be exported at opset 17");
  set_attr(*n, "num_scan_inputs", a.num_scan_inputs);
  if (!a.scan_input_directions.empty()) set_attr(*n, "scan_input_directions", a.scan_input_directions);
  if (!a.scan_output_directions.empty()) set_attr(*n, "scan_output_directions", a.scan_output_directions);
  if (!a.scan_input_axes.empty()) set_attr(*n, "scan_input_axes", a.scan_input_axes);
  if (!a.scan_output_axes.empty()) set_attr(*n, "scan_output_axes", a.scan_output_axes);
  return Status::ok();
});

KILN_REGISTER_ONNX_EXPORTER("SequenceConstruct", same_name);
KILN_REGISTER_ONNX_EXPORTER("SequenceInsert", same_name);
KILN_REGISTER_ONNX_EXPORTER("SequenceAt", same_name);
KILN_REGISTER_ONNX_EXPORTER("SequenceErase", same_name);
KILN_REGISTER_ONNX_EXPORTER("SequenceLength", same_name);
KILN_REGISTER_ONNX_EXPORTER("OptionalHasElement", same_name);
KILN_REGISTER_ONNX_EXPORTER("OptionalGetElement", same_name);
KILN_REGISTER_ONNX_EXPORTER("SequenceEmpty", [](ExportContext& ctx, const Node& node) -> Status {
  auto& n = ctx.add_node("SequenceEmpty", {}, output_names(ctx, node), node.name);
  set_attr(n, "dtype", static_cast<int64_t>(onnx_import::to_onnx_dtype(node.outputs[0]->dtype)));
  return Status::ok();
});
KILN_REGISTER_ONNX_EXPORTER("SplitToSequence", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const SplitToSequenceAttrs&>(*node.attrs);
  auto& n = ctx.add_node("SplitToSequence", input_names(ctx, node), output_names(ctx, node), node.name);
  set_attr(n, "axis", a.axis);
  set_attr(n, "keepdims", int64_t{a.keepdims});
  return Status::ok();
});
KILN_REGISTER_ONNX_EXPORTER("ConcatFromSequence", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const ConcatFromSequenceAttrs&>(*node.attrs);
  auto& n = ctx.add_node("ConcatFromSequence", input_names(ctx, node), output_names(ctx, node), node.name);
  set_attr(n, "axis", a.axis);
  set_attr(n, "new_axis", int64_t{a.new_axis});
  return Status::ok();
});
KILN_REGISTER_ONNX_EXPORTER("Optional", [](ExportContext& ctx, const Node& node) -> Status {
  auto& n = ctx.add_node("Optional", input_names(ctx, node), output_names(ctx, node), node.name);
  if (node.inputs.empty()) {
    onnx::ValueInfoProto info;
    value_info(node.outputs[0], info);
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name("type");
    a->set_type(onnx::AttributeProto::TYPE_PROTO);
    *a->mutable_tp() = info.type().optional_type().elem_type();
  }
  return Status::ok();
});

}  // namespace
}  // namespace kiln::onnx_export
