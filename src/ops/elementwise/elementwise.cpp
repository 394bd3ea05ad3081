#include "ops/elementwise/elementwise.h"

#include "ops/registry.h"

namespace kiln {

const char* enum_name(ElementWiseOp op) {
  switch (op) {
    case ElementWiseOp::kSum: return "sum";
    case ElementWiseOp::kSub: return "sub";
    case ElementWiseOp::kProd: return "prod";
    case ElementWiseOp::kDiv: return "div";
    case ElementWiseOp::kMax: return "max";
    case ElementWiseOp::kMin: return "min";
    case ElementWiseOp::kPow: return "pow";
    case ElementWiseOp::kMod: return "mod";
    case ElementWiseOp::kAnd: return "and";
    case ElementWiseOp::kOr: return "or";
    case ElementWiseOp::kXor: return "xor";
    case ElementWiseOp::kEqual: return "equal";
    case ElementWiseOp::kLess: return "less";
    case ElementWiseOp::kLessOrEqual: return "less_or_equal";
    case ElementWiseOp::kGreater: return "greater";
    case ElementWiseOp::kGreaterOrEqual: return "greater_or_equal";
    case ElementWiseOp::kBitShiftLeft: return "bit_shift_left";
    case ElementWiseOp::kBitShiftRight: return "bit_shift_right";
  }
  return "?";
}

bool is_comparison(ElementWiseOp op) {
  return op == ElementWiseOp::kEqual || op == ElementWiseOp::kLess || op == ElementWiseOp::kLessOrEqual ||
         op == ElementWiseOp::kGreater || op == ElementWiseOp::kGreaterOrEqual;
}

bool is_logical(ElementWiseOp op) {
  return op == ElementWiseOp::kAnd || op == ElementWiseOp::kOr || op == ElementWiseOp::kXor;
}

namespace {

bool is_numeric(DataType d) { return d != DataType::kBool && d != DataType::kFp8E4M3; }
bool is_known_dtype(DataType d) { return static_cast<int>(d) <= static_cast<int>(DataType::kBool); }

Result<Dims> broadcast_inputs(const InferContext& ctx, const char* op, const std::vector<std::string>& names,
                              std::initializer_list<int> inputs) {
  Dims out;
  int first = -1;
  for (int i : inputs) {
    if (first < 0) {
      out = ctx.input(i).dims;
      first = i;
      continue;
    }
    auto b = broadcast_dims(out, ctx.input(i).dims);
    if (!b.is_ok())
      return invalid_argument(op, " inputs cannot be broadcast together: ", names[first],
                              i > 1 ? " (with earlier)" : "", " ", out.to_string(), " vs ", names[i], " ",
                              ctx.input(i).dims.to_string(), "; each dimension must match or be 1");
    out = *b;
  }
  return out;
}

Status check_elementwise_dtypes(const ElementWiseAttrs& a, DataType da, DataType db) {
  const char* name = enum_name(a.op);
  if (!is_known_dtype(da) || !is_known_dtype(db))
    return invalid_argument("ElementWise ", name, " has no kernels for ", dtype_name(da), " x ", dtype_name(db));
  if (a.op == ElementWiseOp::kPow) {
    if (!is_floating(da) && da != DataType::kInt32 && da != DataType::kInt64)
      return invalid_argument("ElementWise pow needs a floating, int32 or int64 base (input a), got ", dtype_name(da));
    if (!is_numeric(db)) return invalid_argument("ElementWise pow needs a numeric exponent (input b), got bool");
    return Status::ok();
  }
  if (da != db)
    return invalid_argument("ElementWise ", name, " needs inputs a and b of one dtype, got ", dtype_name(da), " and ",
                            dtype_name(db));
  if (is_logical(a.op)) {
    if (da != DataType::kBool)
      return invalid_argument("ElementWise ", name, " needs bool inputs, got ", dtype_name(da));
  } else if (a.op == ElementWiseOp::kBitShiftLeft || a.op == ElementWiseOp::kBitShiftRight) {
    if (da != DataType::kUInt8)
      return invalid_argument("ElementWise ", name, " needs unsigned integer (uint8) inputs, got ", dtype_name(da));
  } else if (a.op == ElementWiseOp::kEqual) {
    // Equal also compares bools.
  } else if (!is_numeric(da)) {
    return invalid_argument("ElementWise ", name, " needs numeric inputs, got ", dtype_name(da));
  }
  if (a.op == ElementWiseOp::kMod && is_floating(da) && !a.fmod)
    return invalid_argument("ElementWise mod of ", dtype_name(da), " inputs needs fmod = true (as ONNX Mod requires)");
  return Status::ok();
}

OpSchema elementwise_schema() {
  OpSchema s = make_schema<ElementWiseAttrs>(
      "ElementWise", "elementwise",
      "binary arithmetic, pow, mod, min/max, logic, comparisons and bit shifts with numpy broadcasting");
  s.input_names = {"a", "b"};
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [names = s.input_names](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<ElementWiseAttrs>();
    if (static_cast<int>(a.op) < 0 || static_cast<int>(a.op) > static_cast<int>(ElementWiseOp::kBitShiftRight))
      return invalid_argument("ElementWise attribute op has unknown value ", static_cast<int64_t>(a.op));
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("ElementWise needs both inputs a and b");
    KILN_RETURN_IF_ERROR(check_elementwise_dtypes(a, ctx.input(0).dtype, ctx.input(1).dtype));
    KILN_ASSIGN_OR_RETURN(Dims dims, broadcast_inputs(ctx, "ElementWise", names, {0, 1}));
    const DataType out = is_comparison(a.op) || is_logical(a.op) ? DataType::kBool : ctx.input(0).dtype;
    return one_output(out, dims);
  };
  s.pointwise = true;
  return s;
}

OpSchema where_schema() {
  OpSchema s = make_schema<NoAttrs>("Where", "elementwise", "select x where condition is true, else y (broadcasting)");
  s.input_names = {"condition", "x", "y"};
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.infer = [names = s.input_names](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    for (int i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("Where needs input ", names[i]);
    if (ctx.input(0).dtype != DataType::kBool)
      return invalid_argument("Where needs a bool condition, got ", dtype_name(ctx.input(0).dtype));
    const DataType dx = ctx.input(1).dtype, dy = ctx.input(2).dtype;
    if (dx != dy)
      return invalid_argument("Where needs x and y of one dtype, got ", dtype_name(dx), " and ", dtype_name(dy));
    if (!is_known_dtype(dx)) return invalid_argument("Where has no kernels for ", dtype_name(dx));
    KILN_ASSIGN_OR_RETURN(Dims dims, broadcast_inputs(ctx, "Where", names, {0, 1, 2}));
    return one_output(dx, dims);
  };
  s.pointwise = true;
  return s;
}

OpSchema cast_schema() {
  OpSchema s = make_schema<CastAttrs>("Cast", "elementwise", "converts every element to another dtype (ONNX rules)");
  s.input_names = {"input"};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<CastAttrs>();
    if (!is_known_dtype(a.to))
      return invalid_argument("Cast attribute to has unsupported value ", static_cast<int64_t>(a.to),
                              "; expected float32, float16, bfloat16, int8, uint8, int32, int64 or bool");
    const DataType from = ctx.input(0).dtype;
    if (!is_known_dtype(from)) return invalid_argument("Cast has no kernels for input dtype ", dtype_name(from));
    return one_output(a.to, ctx.input(0).dims);
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(elementwise_schema());
KILN_REGISTER_OP(where_schema());
KILN_REGISTER_OP(cast_schema());

}  // namespace
}  // namespace kiln
