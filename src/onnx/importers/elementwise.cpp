// ONNX binary arithmetic, comparisons, logic, bit shifts, variadic Sum/Mean/Max/Min and Where
// -> kiln ElementWise and Where.
#include "ops/elementwise/elementwise.h"
#include "onnx/importer.h"
#include "ops/shuffle/shuffle.h"

namespace kiln::onnx_import {
namespace {

// Before opset 7, binary ops broadcast only with broadcast=1, b's dims lining up with a's from `axis`
// on. Trailing 1s turn that into numpy broadcasting.
Result<Value*> legacy_broadcast(ImportContext& ctx, const OnnxNode& node, Value* a, Value* b) {
  if (node.opset() >= 7 || node.attr_int("broadcast", 0) == 0 || !node.has_attr("axis")) return b;
  const int ra = a->dims.rank(), rb = b->dims.rank();
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis > ra - rb)
    return node.error("legacy broadcast axis ", node.attr_int("axis", 0), " does not fit input B of rank ", rb,
                      " into input A of rank ", ra);
  const int trailing = ra - static_cast<int>(axis) - rb;
  if (trailing == 0) return b;
  ShuffleAttrs s;
  s.has_reshape_dims = true;
  s.reshape_dims.assign(static_cast<size_t>(rb), 0);  // 0 copies b's dim
  s.reshape_dims.resize(static_cast<size_t>(rb) + static_cast<size_t>(trailing), 1);
  KILN_ASSIGN_OR_RETURN(Node * n, ctx.add(node, "Shuffle", s, {b}, false, "broadcast_b"));
  return n->outputs[0];
}

Status import_binary(ImportContext& ctx, const OnnxNode& node, ElementWiseOp op, bool fmod = false) {
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(b, legacy_broadcast(ctx, node, a, b));
  return ctx.add(node, "ElementWise", elementwise_attrs(op, fmod), {a, b}).status();
}

void register_binary(const char* op_type, ElementWiseOp op) {
  ImporterRegistry::global().add(
      {.op_type = op_type,
       .import = [op](ImportContext& ctx, const OnnxNode& node) -> Status { return import_binary(ctx, node, op); }});
}

// Folds n inputs left to right with a binary op; returns the last value (not yet bound unless final).
Result<Value*> fold_inputs(ImportContext& ctx, const OnnxNode& node, ElementWiseOp op, bool final) {
  KILN_ASSIGN_OR_RETURN(Value * acc, ctx.input(node, 0));
  if (!acc) return node.error("needs at least one input");
  const int n = node.num_inputs();
  for (int i = 1; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Value * next, ctx.input(node, i));
    if (!next) return node.error("input ", i, " is empty; every input of a variadic op must be given");
    const bool last = final && i == n - 1;
    KILN_ASSIGN_OR_RETURN(Node * added,
                          ctx.add(node, "ElementWise", elementwise_attrs(op), {acc, next}, last, str_cat("step", i)));
    acc = added->outputs[0];
  }
  return acc;
}

// Sum, Max, Min: a chain of binary nodes; a single input is an alias.
void register_variadic(const char* op_type, ElementWiseOp op) {
  ImporterRegistry::global().add(
      {.op_type = op_type, .import = [op](ImportContext& ctx, const OnnxNode& node) -> Status {
         KILN_ASSIGN_OR_RETURN(Value * v, fold_inputs(ctx, node, op, true));
         if (node.num_inputs() == 1) return ctx.bind_output(node, 0, v);
         return Status::ok();
       }});
}

const bool kRegistered = [] {
  register_binary("Add", ElementWiseOp::kSum);
  register_binary("Sub", ElementWiseOp::kSub);
  register_binary("Mul", ElementWiseOp::kProd);
  register_binary("Div", ElementWiseOp::kDiv);
  register_binary("Pow", ElementWiseOp::kPow);
  register_binary("And", ElementWiseOp::kAnd);
  register_binary("Or", ElementWiseOp::kOr);
  register_binary("Xor", ElementWiseOp::kXor);
  register_binary("Equal", ElementWiseOp::kEqual);
  register_binary("Less", ElementWiseOp::kLess);
  register_binary("Greater", ElementWiseOp::kGreater);
  register_binary("LessOrEqual", ElementWiseOp::kLessOrEqual);
  register_binary("GreaterOrEqual", ElementWiseOp::kGreaterOrEqual);
  register_variadic("Sum", ElementWiseOp::kSum);
  register_variadic("Max", ElementWiseOp::kMax);
  register_variadic("Min", ElementWiseOp::kMin);
  return true;
}();

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Mod",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * a, ctx.input(node, 0));
      const bool fmod = node.attr_int("fmod", 0) != 0;
      if (is_floating(a->dtype) && !fmod)
        return node.error("Mod of ", dtype_name(a->dtype), " inputs needs fmod = 1 (ONNX requires it for floats)");
      return import_binary(ctx, node, ElementWiseOp::kMod, fmod);
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "BitShift",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(std::string dir, node.attr_string("direction"));
      KILN_ASSIGN_OR_RETURN(Value * a, ctx.input(node, 0));
      KILN_ASSIGN_OR_RETURN(Value * b, ctx.input(node, 1));
      const bool left = dir == "LEFT";
      if (a->dtype == DataType::kUInt8 || (a->dtype != DataType::kInt32 && a->dtype != DataType::kInt64))
        return import_binary(ctx, node, left ? ElementWiseOp::kBitShiftLeft : ElementWiseOp::kBitShiftRight);
      // uint16/uint32 arrive widened to int32/int64 (non-negative): shift as a * 2^b or a / 2^b.
      KILN_ASSIGN_OR_RETURN(Tensor two, Tensor::empty(a->dtype, {}));
      two.set(0, 2.0);
      KILN_ASSIGN_OR_RETURN(Value * base, ctx.add_constant(node, "two", std::move(two)));
      KILN_ASSIGN_OR_RETURN(Node * scale, ctx.add(node, "ElementWise", elementwise_attrs(ElementWiseOp::kPow),
                                                  {base, b}, false, "scale"));
      return ctx
          .add(node, "ElementWise", elementwise_attrs(left ? ElementWiseOp::kProd : ElementWiseOp::kDiv),
               {a, scale->outputs[0]})
          .status();
    },
    .check = [](const OnnxNode& node) -> Status {
      const std::string dir = node.attr_string("direction", "");
      if (dir != "LEFT" && dir != "RIGHT")
        return node.error("BitShift attribute direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
      return Status::ok();
    },
});

// Mean: the sum chain, then one division by the input count.
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Mean",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      const int n = node.num_inputs();
      KILN_ASSIGN_OR_RETURN(Value * sum, fold_inputs(ctx, node, ElementWiseOp::kSum, false));
      if (n == 1) return ctx.bind_output(node, 0, sum);
      if (!is_floating(sum->dtype)) return node.unsupported_error("Mean of ", dtype_name(sum->dtype), " inputs");
      KILN_ASSIGN_OR_RETURN(Tensor count, Tensor::empty(sum->dtype, {}));
      count.set(0, static_cast<double>(n));
      KILN_ASSIGN_OR_RETURN(Value * divisor, ctx.add_constant(node, "count", std::move(count)));
      return ctx.add(node, "ElementWise", elementwise_attrs(ElementWiseOp::kDiv), {sum, divisor}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Where",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * c, ctx.input(node, 0));
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 1));
      KILN_ASSIGN_OR_RETURN(Value * y, ctx.input(node, 2));
      return ctx.add(node, "Where", NoAttrs{}, {c, x, y}).status();
    },
});

}  // namespace
}  // namespace kiln::onnx_import
