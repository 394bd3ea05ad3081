// ONNX DFT, STFT, MelWeightMatrix -> the kiln signal family; HannWindow, HammingWindow,
// BlackmanWindow -> kiln Window (imported directly rather than through their function bodies).
#include "ops/signal/signal.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/window/window.h"

namespace kiln::onnx_import {
namespace {

Result<std::vector<Value*>> all_inputs(ImportContext& ctx, const OnnxNode& node) {
  std::vector<Value*> in;
  for (int i = 0; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    in.push_back(v);
  }
  while (!in.empty() && !in.back()) in.pop_back();
  return in;
}

Result<DataType> output_datatype(const OnnxNode& node) {
  const int64_t t = node.attr_int("output_datatype", 1);
  bool narrowed = false;
  const std::optional<DataType> d = from_onnx_dtype(t, &narrowed);
  if (!d || *d == DataType::kBool)
    return node.unsupported_error("output_datatype ", onnx_dtype_name(t),
                                  " is not supported; use a float or integer type");
  return *d;
}

Status check_output_datatype(const OnnxNode& node) { return output_datatype(node).status(); }

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "DFT",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      DftAttrs a;
      a.axis = node.attr_int("axis", 1);
      a.inverse = node.attr_int("inverse", 0) != 0;
      a.onesided = node.attr_int("onesided", 0) != 0;
      KILN_ASSIGN_OR_RETURN(std::vector<Value*> in, all_inputs(ctx, node));
      if (in.empty() || !in[0]) return node.error("DFT needs its input signal");
      if (in.size() > 2) return node.unsupported_error("DFT with more than 2 inputs (opset 20's axis input)");
      return ctx.add(node, "DFT", a, in).status();
    },
    .check = [](const OnnxNode& node) -> Status {
      if (node.attr_int("inverse", 0) != 0 && node.attr_int("onesided", 0) != 0)
        return node.unsupported_error(
            "DFT with inverse=1 and onesided=1 (a complex-to-real inverse); "
            "give the full spectrum with onesided=0");
      return Status::ok();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "STFT",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      StftAttrs a;
      a.onesided = node.attr_int("onesided", 1) != 0;
      KILN_ASSIGN_OR_RETURN(std::vector<Value*> in, all_inputs(ctx, node));
      if (in.size() < 2 || !in[0] || !in[1]) return node.error("STFT needs signal and frame_step");
      return ctx.add(node, "STFT", a, in).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "MelWeightMatrix",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      MelWeightMatrixAttrs a;
      KILN_ASSIGN_OR_RETURN(a.dtype, output_datatype(node));
      KILN_ASSIGN_OR_RETURN(std::vector<Value*> in, all_inputs(ctx, node));
      if (in.size() != 5) return node.error("MelWeightMatrix needs 5 inputs, got ", in.size());
      return ctx.add(node, "MelWeightMatrix", a, in).status();
    },
    .check = check_output_datatype,
});

ImportFn window(WindowKind kind) {
  return [kind](ImportContext& ctx, const OnnxNode& node) -> Status {
    WindowAttrs a;
    a.kind = kind;
    a.periodic = node.attr_int("periodic", 1) != 0;
    KILN_ASSIGN_OR_RETURN(a.dtype, output_datatype(node));
    KILN_ASSIGN_OR_RETURN(Value * size, ctx.input(node, 0));
    if (!size) return node.error(node.op_type(), " needs its size input");
    return ctx.add(node, "Window", a, {size}).status();
  };
}

const bool kWindows = [] {
  auto& r = ImporterRegistry::global();
  r.add({.op_type = "HannWindow", .import = window(WindowKind::kHann), .check = check_output_datatype});
  r.add({.op_type = "HammingWindow", .import = window(WindowKind::kHamming), .check = check_output_datatype});
  r.add({.op_type = "BlackmanWindow", .import = window(WindowKind::kBlackman), .check = check_output_datatype});
  return true;
}();

}  // namespace
}  // namespace kiln::onnx_import
