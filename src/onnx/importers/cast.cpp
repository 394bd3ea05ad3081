// ONNX Cast and CastLike -> kiln Cast (StringCast when strings are involved).
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/elementwise/elementwise.h"
#include "ops/strings/strings.h"

namespace kiln::onnx_import {
namespace {

// The kiln dtype for an ONNX element type code; float64 computes as float32, int16/uint16 as int32
// and uint32 as int64 (as everywhere in the importer).
Result<DataType> target_dtype(const OnnxNode& node, int64_t onnx_type) {
  const auto d = from_onnx_dtype(onnx_type);
  if (!d)
    return node.unsupported_error(
        "cast to ", onnx_dtype_name(onnx_type),
        ": kiln holds float32/float16/bfloat16, int8/uint8/int32/int64, bool and string tensors");
  return *d;
}

Status add_cast(ImportContext& ctx, const OnnxNode& node, DataType to) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
  if (!x) return node.error("Cast needs its input");
  if (x->dtype == to && to == DataType::kString) return ctx.add(node, "Identity", NoAttrs{}, {x}).status();
  if (x->dtype == DataType::kString || to == DataType::kString) {  // text <-> numbers, on the host
    StringCastAttrs a;
    a.to = to;
    return ctx.add(node, "StringCast", a, {x}).status();
  }
  return ctx.add(node, "Cast", cast_to(to), {x}).status();
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Cast",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(int64_t to, node.attr_int("to"));
      KILN_ASSIGN_OR_RETURN(DataType d, target_dtype(node, to));
      return add_cast(ctx, node, d);
    },
    .check = [](const OnnxNode& node) -> Status {
      if (!node.has_attr("to")) return node.error("Cast needs the attribute 'to'");
      return target_dtype(node, node.attr_int("to", 0)).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "CastLike",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * like, ctx.input(node, 1));
      if (!like) return node.error("CastLike needs input 'target_type'");
      return add_cast(ctx, node, like->dtype);
    },
});

}  // namespace
}  // namespace kiln::onnx_import
