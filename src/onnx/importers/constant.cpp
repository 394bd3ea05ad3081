// ONNX Constant and Identity: bindings, not computations.
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {
namespace {

Result<Tensor> constant_value(const OnnxNode& node, const TensorSource& source) {
  for (const auto& a : node.proto().attribute()) {
    const std::string& n = a.name();
    if (n == "value") return tensor_from_proto(a.t(), source, str_cat("Constant '", node.proto().output(0), "'"));
    if (n == "value_float" || n == "value_int") {
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(n == "value_float" ? DataType::kFloat32 : DataType::kInt64, {}));
      t.set(0, n == "value_float" ? static_cast<double>(a.f()) : static_cast<double>(a.i()));
      return t;
    }
    if (n == "value_floats" || n == "value_ints") {
      const bool f = n == "value_floats";
      const int64_t count = f ? a.floats_size() : a.ints_size();
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(f ? DataType::kFloat32 : DataType::kInt64, {count}));
      for (int64_t i = 0; i < count; ++i)
        t.set(i, f ? static_cast<double>(a.floats(i)) : static_cast<double>(a.ints(i)));
      return t;
    }
    if (n == "sparse_value" || n == "value_string" || n == "value_strings")
      return node.unsupported_error("Constant with attribute '", n,
                                    "' is not supported (kiln holds dense numeric tensors)");
  }
  return node.error("Constant has no value attribute");
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Constant",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Tensor value, constant_value(node, ctx.tensor_source()));
      KILN_ASSIGN_OR_RETURN(Value * v, ctx.graph().add_constant(node.proto().output(0), std::move(value)));
      ctx.bind(node.proto().output(0), v);
      return Status::ok();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Identity",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      return ctx.bind_output(node, 0, x);
    },
});

}  // namespace
}  // namespace kiln::onnx_import
