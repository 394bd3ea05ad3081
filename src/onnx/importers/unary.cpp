// ONNX elementwise math functions, Not, IsNaN, IsInf -> kiln Unary; Shrink -> compare/select.
#include "ops/unary/unary.h"
#include "onnx/importer.h"
#include "ops/elementwise/elementwise.h"

namespace kiln::onnx_import {
namespace {

Status import_unary(ImportContext& ctx, const OnnxNode& node, const UnaryAttrs& a) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
  return ctx.add(node, "Unary", a, {x}).status();
}

void register_unary(const char* op_type, UnaryOp op) {
  ImporterRegistry::global().add({.op_type = op_type, .import = [op](ImportContext& ctx, const OnnxNode& node) {
                                    return import_unary(ctx, node, unary_attrs(op));
                                  }});
}

const bool kRegistered = [] {
  register_unary("Exp", UnaryOp::kExp);
  register_unary("Log", UnaryOp::kLog);
  register_unary("Sqrt", UnaryOp::kSqrt);
  register_unary("Reciprocal", UnaryOp::kReciprocal);
  register_unary("Abs", UnaryOp::kAbs);
  register_unary("Neg", UnaryOp::kNeg);
  register_unary("Floor", UnaryOp::kFloor);
  register_unary("Ceil", UnaryOp::kCeil);
  register_unary("Round", UnaryOp::kRound);
  register_unary("Sign", UnaryOp::kSign);
  register_unary("Erf", UnaryOp::kErf);
  register_unary("Sin", UnaryOp::kSin);
  register_unary("Cos", UnaryOp::kCos);
  register_unary("Tan", UnaryOp::kTan);
  register_unary("Asin", UnaryOp::kAsin);
  register_unary("Acos", UnaryOp::kAcos);
  register_unary("Atan", UnaryOp::kAtan);
  register_unary("Sinh", UnaryOp::kSinh);
  register_unary("Cosh", UnaryOp::kCosh);
  register_unary("Asinh", UnaryOp::kAsinh);
  register_unary("Acosh", UnaryOp::kAcosh);
  register_unary("Atanh", UnaryOp::kAtanh);
  register_unary("Not", UnaryOp::kNot);
  register_unary("IsNaN", UnaryOp::kIsNan);
  return true;
}();

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "IsInf",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      UnaryAttrs a = unary_attrs(UnaryOp::kIsInf);
      a.detect_positive = node.attr_int("detect_positive", 1) != 0;
      a.detect_negative = node.attr_int("detect_negative", 1) != 0;
      return import_unary(ctx, node, a);
    },
});

// Shrink: y = x < -lambd ? x + bias : (x > lambd ? x - bias : 0), as two selects.
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Shrink",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      const double lambd = node.attr_float("lambd", 0.5f), bias = node.attr_float("bias", 0.f);
      auto scalar = [&](const char* name, double v) -> Result<Value*> {
        KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(x->dtype, {}));
        t.set(0, v);
        return ctx.add_constant(node, name, std::move(t));
      };
      if (x->dtype == DataType::kBool) return node.error("Shrink needs a numeric input, got bool");
      KILN_ASSIGN_OR_RETURN(Value * lo, scalar("neg_lambd", -lambd));
      KILN_ASSIGN_OR_RETURN(Value * hi, scalar("lambd", lambd));
      KILN_ASSIGN_OR_RETURN(Value * b, scalar("bias", bias));
      KILN_ASSIGN_OR_RETURN(Value * zero, scalar("zero", 0.0));
      auto step = [&](ElementWiseOp op, Value* p, Value* q, const char* suffix) -> Result<Value*> {
        KILN_ASSIGN_OR_RETURN(Node * n, ctx.add(node, "ElementWise", elementwise_attrs(op), {p, q}, false, suffix));
        return n->outputs[0];
      };
      KILN_ASSIGN_OR_RETURN(Value * below, step(ElementWiseOp::kLess, x, lo, "below"));
      KILN_ASSIGN_OR_RETURN(Value * above, step(ElementWiseOp::kGreater, x, hi, "above"));
      KILN_ASSIGN_OR_RETURN(Value * plus, step(ElementWiseOp::kSum, x, b, "plus_bias"));
      KILN_ASSIGN_OR_RETURN(Value * minus, step(ElementWiseOp::kSub, x, b, "minus_bias"));
      KILN_ASSIGN_OR_RETURN(Node * upper, ctx.add(node, "Where", NoAttrs{}, {above, minus, zero}, false, "upper"));
      return ctx.add(node, "Where", NoAttrs{}, {below, plus, upper->outputs[0]}).status();
    },
});

}  // namespace
}  // namespace kiln::onnx_import
