// ONNX If, Loop, Scan, SequenceMap (nodes that own graphs) and the sequence and optional ops.
#include "ops/control_flow/control_flow.h"
#include "kiln/logger.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {
namespace {

// The type a subgraph input takes from an outer value whose dims may change between iterations.
TensorDesc loose_desc(const Value* v, int drop_axis = -1) {
  TensorDesc d{v->dtype, {}, true, v->kind};
  if (v->kind == ValueKind::kTensor)
    for (int i = 0; i < v->dims.rank(); ++i)
      if (i != drop_axis) d.dims.push_back(kDynamicDim);
  return d;
}

Status import_if(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(Value * cond, ctx.input(node, 0));
  if (const Tensor* c = cond->value(); c && c->numel() == 1) {
    const char* branch = c->at(0) != 0 ? "then_branch" : "else_branch";
    log_info("fold-if: If '", ctx.node_name(node), "' has a condition known at build time; replaced by its ", branch);
    return ctx.inline_subgraph(node, branch);
  }
  KILN_ASSIGN_OR_RETURN(Subgraph then_g, ctx.import_subgraph(node, "then_branch", {}));
  KILN_ASSIGN_OR_RETURN(Subgraph else_g, ctx.import_subgraph(node, "else_branch", {}));
  std::vector<Subgraph> subs;
  subs.push_back(std::move(then_g));
  subs.push_back(std::move(else_g));
  return ctx.add_owner(node, "If", std::make_unique<NoAttrs>(), {cond}, std::move(subs)).status();
}

Status import_loop(ImportContext& ctx, const OnnxNode& node) {
  std::vector<Value*> inputs;
  std::vector<TensorDesc> hints{{DataType::kInt64, {}, true}, {DataType::kBool, {}, true}};
  for (int i = 0; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    if (i >= 2 && !v) return node.error("loop-carried input ", i - 2, " is missing");
    inputs.push_back(v);
    if (i >= 2) hints.push_back(loose_desc(v));
  }
  while (inputs.size() < 2) inputs.push_back(nullptr);
  KILN_ASSIGN_OR_RETURN(Subgraph body, ctx.import_subgraph(node, "body", hints));
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  return ctx.add_owner(node, "Loop", std::make_unique<NoAttrs>(), inputs, std::move(subs)).status();
}

Status import_scan(ImportContext& ctx, const OnnxNode& node) {
  auto a = std::make_unique<ScanAttrs>();
  a->batched = node.opset() < 9;
  KILN_ASSIGN_OR_RETURN(a->num_scan_inputs, node.attr_int("num_scan_inputs"));
  a->scan_input_directions = node.attr_ints(a->batched ? "directions" : "scan_input_directions", {});
  if (!a->batched) {
    a->scan_output_directions = node.attr_ints("scan_output_directions", {});
    a->scan_input_axes = node.attr_ints("scan_input_axes", {});
    a->scan_output_axes = node.attr_ints("scan_output_axes", {});
  }
  const int first = a->batched ? 1 : 0;
  std::vector<Value*> inputs;
  std::vector<TensorDesc> hints;
  const int n = node.num_inputs() - first - static_cast<int>(a->num_scan_inputs);
  if (n < 0) return node.error("num_scan_inputs is ", a->num_scan_inputs, " but the node has fewer inputs");
  for (int i = 0; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    inputs.push_back(v);
    if (i < first) continue;
    if (!v) return node.error("input ", i, " is missing");
    const int j = i - first - n;  // scan input index, negative for states
    const int lead = a->batched ? 1 : 0;
    int drop = a->batched ? 0 : -1;
    if (j >= 0) drop = static_cast<int>(scan_axis(a->scan_input_axes, j, v->dims.rank() - lead)) + lead;
    TensorDesc d = loose_desc(v, drop);
    if (a->batched && j >= 0 && d.dims.rank() > 0) {  // the body does not see the batch dim
      Dims e;
      for (int k = 1; k < d.dims.rank(); ++k) e.push_back(kDynamicDim);
      d.dims = e;
    }
    hints.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(Subgraph body, ctx.import_subgraph(node, "body", hints));
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  return ctx.add_owner(node, "Scan", std::move(a), inputs, std::move(subs)).status();
}

Status import_sequence_map(ImportContext& ctx, const OnnxNode& node) {
  std::vector<Value*> inputs;
  std::vector<TensorDesc> hints;
  for (int i = 0; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    if (!v) return node.error("input ", i, " is missing");
    inputs.push_back(v);
    TensorDesc d = loose_desc(v);
    if (v->kind == ValueKind::kSequence) d = TensorDesc::absent();  // the body's declared element type
    hints.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(Subgraph body, ctx.import_subgraph(node, "body", hints));
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  return ctx.add_owner(node, "SequenceMap", std::make_unique<NoAttrs>(), inputs, std::move(subs)).status();
}

// The ops whose inputs map 1:1 and that have no attributes.
Status import_plain(ImportContext& ctx, const OnnxNode& node) {
  std::vector<Value*> inputs;
  for (int i = 0; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    inputs.push_back(v);
  }
  return ctx.add(node, node.op_type(), NoAttrs{}, inputs).status();
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "If", .import = import_if});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "Loop", .import = import_loop});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "Scan", .import = import_scan});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceMap", .import = import_sequence_map});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceConstruct", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceInsert", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceAt", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceErase", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "SequenceLength", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "OptionalHasElement", .import = import_plain});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "OptionalGetElement", .import = import_plain});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "SequenceEmpty",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      SequenceEmptyAttrs a;
      const int64_t t = node.attr_int("dtype", onnx::TensorProto::FLOAT);
      auto d = from_onnx_dtype(static_cast<int>(t));
      if (!d)
        return node.unsupported_error("SequenceEmpty dtype ", onnx_dtype_name(static_cast<int>(t)),
                                      " is not supported");
      a.dtype = *d;
      return ctx.add(node, "SequenceEmpty", a, {}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "SplitToSequence",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      SplitToSequenceAttrs a;
      a.axis = node.attr_int("axis", 0);
      a.keepdims = node.attr_int("keepdims", 1) != 0;
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      KILN_ASSIGN_OR_RETURN(Value * split, ctx.input(node, 1));
      std::vector<Value*> in{x};
      if (split) in.push_back(split);
      return ctx.add(node, "SplitToSequence", a, in).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "ConcatFromSequence",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      ConcatFromSequenceAttrs a;
      KILN_ASSIGN_OR_RETURN(a.axis, node.attr_int("axis"));
      a.new_axis = node.attr_int("new_axis", 0) != 0;
      KILN_ASSIGN_OR_RETURN(Value * s, ctx.input(node, 0));
      return ctx.add(node, "ConcatFromSequence", a, {s}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Optional",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      OptionalAttrs a;
      for (const auto& attr : node.proto().attribute()) {
        if (attr.name() != "type" || !attr.has_tp()) continue;
        onnx::TypeProto t = attr.tp();
        a.sequence = t.has_sequence_type();
        if (a.sequence) t = onnx::TypeProto(t.sequence_type().elem_type());
        if (!t.has_tensor_type()) return node.unsupported_error("Optional of this type is not supported");
        auto d = from_onnx_dtype(t.tensor_type().elem_type());
        if (!d) return node.unsupported_error("Optional element type is not supported");
        a.dtype = *d;
      }
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      std::vector<Value*> in;
      if (x) in.push_back(x);
      return ctx.add(node, "Optional", a, in).status();
    },
});

}  // namespace
}  // namespace kiln::onnx_import
