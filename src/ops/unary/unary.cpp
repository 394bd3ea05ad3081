#include "ops/unary/unary.h"

#include "ops/registry.h"

namespace kiln {

const char* enum_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kReciprocal: return "reciprocal";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kFloor: return "floor";
    case UnaryOp::kCeil: return "ceil";
    case UnaryOp::kRound: return "round";
    case UnaryOp::kSign: return "sign";
    case UnaryOp::kErf: return "erf";
    case UnaryOp::kSin: return "sin";
    case UnaryOp::kCos: return "cos";
    case UnaryOp::kTan: return "tan";
    case UnaryOp::kAsin: return "asin";
    case UnaryOp::kAcos: return "acos";
    case UnaryOp::kAtan: return "atan";
    case UnaryOp::kSinh: return "sinh";
    case UnaryOp::kCosh: return "cosh";
    case UnaryOp::kAsinh: return "asinh";
    case UnaryOp::kAcosh: return "acosh";
    case UnaryOp::kAtanh: return "atanh";
    case UnaryOp::kNot: return "not";
    case UnaryOp::kIsNan: return "isnan";
    case UnaryOp::kIsInf: return "isinf";
  }
  return "?";
}

namespace {

OpSchema unary_schema() {
  OpSchema s = make_schema<UnaryAttrs>(
      "Unary", "unary",
      "exp, log, sqrt, reciprocal, abs, neg, floor/ceil/round, sign, erf, trigonometry, not, isnan, isinf");
  s.input_names = {"x"};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<UnaryAttrs>();
    if (static_cast<int>(a.op) < 0 || static_cast<int>(a.op) > static_cast<int>(UnaryOp::kIsInf))
      return invalid_argument("Unary attribute op has unknown value ", static_cast<int64_t>(a.op));
    const DataType d = ctx.input(0).dtype;
    const char* name = enum_name(a.op);
    const bool floating = d == DataType::kFloat32 || d == DataType::kFloat16 || d == DataType::kBFloat16;
    switch (a.op) {
      case UnaryOp::kNot:
        if (d != DataType::kBool) return invalid_argument("Unary not needs a bool input, got ", dtype_name(d));
        return one_output(DataType::kBool, ctx.input(0).dims);
      case UnaryOp::kIsNan:
      case UnaryOp::kIsInf:
        if (!floating) return invalid_argument("Unary ", name, " needs a floating-point input, got ", dtype_name(d));
        return one_output(DataType::kBool, ctx.input(0).dims);
      case UnaryOp::kAbs:
      case UnaryOp::kSign:
        if (!floating && !is_integer(d))
          return invalid_argument("Unary ", name, " needs a numeric input, got ", dtype_name(d));
        break;
      case UnaryOp::kNeg:
        if (!floating && d != DataType::kInt8 && d != DataType::kInt32 && d != DataType::kInt64)
          return invalid_argument("Unary neg needs a floating or signed integer input, got ", dtype_name(d));
        break;
      default:
        if (!floating) return invalid_argument("Unary ", name, " needs a floating-point input, got ", dtype_name(d));
    }
    return one_output(d, ctx.input(0).dims);
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(unary_schema());

}  // namespace
}  // namespace kiln
