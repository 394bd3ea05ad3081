#include "ops/quantization/quantization.h"

#include "ops/matmul/matmul.h"
#include "ops/registry.h"

namespace kiln {
namespace {

bool is_quantized(DataType d) { return d == DataType::kInt8 || d == DataType::kUInt8; }
bool one_element(const Dims& d) {
  for (int i = 0; i < d.rank(); ++i)
    if (d[i] != 1) return false;
  return true;
}

}  // namespace

Result<QuantParamLayout> quant_param_layout(std::string_view op, std::string_view what, const Dims& p, const Dims& x,
                                            int64_t axis) {
  QuantParamLayout l;
  if (one_element(p)) return l;
  if (p.rank() != 1)
    return invalid_argument(op, " input ", what, " of shape ", p.to_string(),
                            " must be a scalar (per tensor) or 1-D (per axis)");
  const int r = x.rank();
  if (axis < -r || axis >= r)
    return invalid_argument(op, " axis ", axis, " is out of range for x of shape ", x.to_string(), " (valid: ", -r,
                            "..", r - 1, ")");
  l.per_axis = true;
  l.axis = static_cast<int>(axis < 0 ? axis + r : axis);
  if (p[0] != kDynamicDim && x[l.axis] != kDynamicDim && p[0] != x[l.axis])
    return invalid_argument(op, " input ", what, " of shape ", p.to_string(), " must have one value per index of axis ",
                            l.axis, " of x ", x.to_string(), " (", x[l.axis], ")");
  for (int i = 0; i < r; ++i) (i < l.axis ? l.outer : i == l.axis ? l.size : l.inner) *= x[i];
  return l;
}

Result<Dims> row_zero_point_dims(std::string_view op, std::string_view what, const Dims& zp, const Dims& operand,
                                 bool per_row) {
  if (one_element(zp)) return Dims{};
  const int r = operand.rank();
  if (r < 2)
    return invalid_argument(op, " input ", what, " of shape ", zp.to_string(), " must have one element because its ",
                            "operand of shape ", operand.to_string(), " is a vector");
  Dims d = zp;
  if (per_row && zp.rank() == 1 && zp[0] == operand[r - 2]) d = Dims{zp[0], 1};
  auto both = broadcast_dims(d, operand);
  const bool layout_ok = per_row ? d[d.rank() - 1] == 1 : (d.rank() < 2 || d[d.rank() - 2] == 1);
  if (!both || *both != operand || !layout_ok)
    return invalid_argument(op, " input ", what, " of shape ", zp.to_string(),
                            " must be a scalar or hold one value per ", per_row ? "row" : "column",
                            " of its operand of shape ", operand.to_string());
  return d;
}

namespace {

Status check_quantized(std::string_view op, const InferContext& ctx, int i, std::string_view what) {
  if (!ctx.has_input(i)) return Status::ok();
  if (!is_quantized(ctx.input(i).dtype))
    return invalid_argument(op, " input ", what, " has type ", dtype_name(ctx.input(i).dtype),
                            "; expected int8 or uint8");
  return Status::ok();
}

Status check_scale(std::string_view op, const InferContext& ctx, int i, std::string_view what) {
  if (!is_floating(ctx.input(i).dtype))
    return invalid_argument(op, " input ", what, " has type ", dtype_name(ctx.input(i).dtype),
                            "; expected a floating-point type");
  return Status::ok();
}

Status same_layout(std::string_view op, const InferContext& ctx, int scale, int zp) {
  if (!ctx.has_input(zp)) return Status::ok();
  const Dims& s = ctx.input(scale).dims;
  const Dims& z = ctx.input(zp).dims;
  if (one_element(s) != one_element(z) || (!one_element(s) && s != z))
    return invalid_argument(op, " zero_point of shape ", z.to_string(), " must have the shape of scale ",
                            s.to_string());
  return Status::ok();
}

OpSchema quantize_schema() {
  OpSchema s = make_schema<QuantizeAttrs>(
      "Quantize", "quantization",
      "y = saturate(round(x / scale) + zero_point) to int8/uint8, per tensor or per axis (ONNX QuantizeLinear)");
  s.input_names = {"x", "scale", "zero_point"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "Quantize";
    const auto& a = ctx.attrs_as<QuantizeAttrs>();
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype) && x.dtype != DataType::kInt32)
      return invalid_argument(kOp, " input x has type ", dtype_name(x.dtype), "; expected a float type or int32");
    KILN_RETURN_IF_ERROR(check_scale(kOp, ctx, 1, "scale"));
    KILN_RETURN_IF_ERROR(check_quantized(kOp, ctx, 2, "zero_point"));
    KILN_RETURN_IF_ERROR(quant_param_layout(kOp, "scale", ctx.input(1).dims, x.dims, a.axis).status());
    KILN_RETURN_IF_ERROR(same_layout(kOp, ctx, 1, 2));
    const DataType out = ctx.has_input(2) ? ctx.input(2).dtype : a.dtype;
    if (!is_quantized(out))
      return invalid_argument(kOp, " attribute dtype is ", dtype_name(out), "; expected int8 or uint8");
    return one_output(out, x.dims);
  };
  return s;
}

OpSchema dequantize_schema() {
  OpSchema s = make_schema<QuantizeAttrs>(
      "Dequantize", "quantization",
      "y = (x - zero_point) * scale from int8/uint8/int32, per tensor or per axis (ONNX DequantizeLinear)");
  s.input_names = {"x", "scale", "zero_point"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "Dequantize";
    const auto& a = ctx.attrs_as<QuantizeAttrs>();
    const TensorDesc& x = ctx.input(0);
    if (!is_quantized(x.dtype) && x.dtype != DataType::kInt32)
      return invalid_argument(kOp, " input x has type ", dtype_name(x.dtype), "; expected int8, uint8 or int32");
    KILN_RETURN_IF_ERROR(check_scale(kOp, ctx, 1, "scale"));
    if (ctx.has_input(2) && ctx.input(2).dtype != x.dtype)
      return invalid_argument(kOp, " input zero_point has type ", dtype_name(ctx.input(2).dtype), " but x has ",
                              dtype_name(x.dtype), "; both must have the same type");
    KILN_RETURN_IF_ERROR(quant_param_layout(kOp, "scale", ctx.input(1).dims, x.dims, a.axis).status());
    KILN_RETURN_IF_ERROR(same_layout(kOp, ctx, 1, 2));
    return one_output(ctx.input(1).dtype, x.dims);
  };
  return s;
}

OpSchema dynamic_quantize_schema() {
  OpSchema s = make_schema<NoAttrs>(
      "DynamicQuantize", "quantization",
      "uint8 quantization with scale and zero point from the range of x: y, scale, zero_point (ONNX "
      "DynamicQuantizeLinear)");
  s.input_names = {"x"};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype))
      return invalid_argument("DynamicQuantize input x has type ", dtype_name(x.dtype), "; expected a float type");
    return std::vector<TensorDesc>{
        {DataType::kUInt8, x.dims, true}, {DataType::kFloat32, {}, true}, {DataType::kUInt8, {}, true}};
  };
  return s;
}

// Shapes of an integer matmul: operands at `a` and `b`, their zero points at `a_zp` and `b_zp`.
Result<MatmulShape> integer_matmul_shape(std::string_view op, const InferContext& ctx, int a, int b, int a_zp,
                                         int b_zp) {
  KILN_RETURN_IF_ERROR(check_quantized(op, ctx, a, "a"));
  KILN_RETURN_IF_ERROR(check_quantized(op, ctx, b, "b"));
  for (auto [zp, operand, name] : {std::tuple{a_zp, a, "a_zero_point"}, std::tuple{b_zp, b, "b_zero_point"}}) {
    if (!ctx.has_input(zp)) continue;
    if (ctx.input(zp).dtype != ctx.input(operand).dtype)
      return invalid_argument(op, " input ", name, " has type ", dtype_name(ctx.input(zp).dtype),
                              " but its operand has ", dtype_name(ctx.input(operand).dtype),
                              "; both must have the same type");
    KILN_RETURN_IF_ERROR(
        row_zero_point_dims(op, name, ctx.input(zp).dims, ctx.input(operand).dims, operand == a).status());
  }
  auto shape = matmul_shape(ctx.input(a).dims, ctx.input(b).dims, MatrixMultiplyAttrs{});
  if (!shape) return Status(shape.status()).with_prefix(std::string(op) + ": ");
  return shape;
}

OpSchema matrix_multiply_integer_schema() {
  OpSchema s = make_schema<NoAttrs>(
      "MatrixMultiplyInteger", "quantization",
      "int32 y = (a - a_zero_point) @ (b - b_zero_point) of int8/uint8 operands (ONNX MatMulInteger)");
  s.input_names = {"a", "b", "a_zero_point", "b_zero_point"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    KILN_ASSIGN_OR_RETURN(MatmulShape shape, integer_matmul_shape("MatrixMultiplyInteger", ctx, 0, 1, 2, 3));
    return one_output(DataType::kInt32, shape.out);
  };
  return s;
}

OpSchema quantized_matrix_multiply_schema() {
  OpSchema s = make_schema<NoAttrs>(
      "QuantizedMatrixMultiply", "quantization",
      "quantized matmul: integer product requantized with a_scale * b_scale / y_scale (ONNX QLinearMatMul)");
  s.input_names = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"};
  s.min_inputs = 8;
  s.max_inputs = 8;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "QuantizedMatrixMultiply";
    KILN_ASSIGN_OR_RETURN(MatmulShape shape, integer_matmul_shape(kOp, ctx, 0, 3, 2, 5));
    KILN_RETURN_IF_ERROR(check_quantized(kOp, ctx, 7, "y_zero_point"));
    for (auto [i, operand, per_row, name] :
         {std::tuple{1, 0, true, "a_scale"}, std::tuple{4, 3, false, "b_scale"}, std::tuple{6, 0, true, "y_scale"}}) {
      KILN_RETURN_IF_ERROR(check_scale(kOp, ctx, i, name));
      KILN_RETURN_IF_ERROR(
          row_zero_point_dims(kOp, name, ctx.input(i).dims, ctx.input(operand).dims, per_row).status());
    }
    KILN_RETURN_IF_ERROR(row_zero_point_dims(kOp, "y_zero_point", ctx.input(7).dims, ctx.input(0).dims, true).status());
    if (ctx.input(0).dims.rank() < 2 || ctx.input(3).dims.rank() < 2)
      for (int i : {1, 4, 6, 7})
        if (!one_element(ctx.input(i).dims))
          return invalid_argument(kOp, " with a vector operand needs per-tensor scales and zero points");
    return one_output(ctx.input(7).dtype, shape.out);
  };
  return s;
}

// Shapes of an integer convolution: x at 0, w at `w`, the weight's per-channel parameters at `w_params`.
Result<Dims> integer_conv_dims(std::string_view op, const InferContext& ctx, int w, std::initializer_list<int> w_params,
                               std::initializer_list<int> x_params) {
  const auto& a = ctx.attrs_as<ConvolutionAttrs>();
  KILN_RETURN_IF_ERROR(check_quantized(op, ctx, 0, "x"));
  KILN_RETURN_IF_ERROR(check_quantized(op, ctx, w, "w"));
  const Dims& x = ctx.input(0).dims;
  const Dims& wd = ctx.input(w).dims;
  if (x.rank() < 3 || wd.rank() != x.rank())
    return invalid_argument(op, " needs x [N, C, spatial...] and w [M, C / group, kernel...] of the same rank, got x ",
                            x.to_string(), " and w ", wd.to_string());
  if (a.group < 1) return invalid_argument(op, " attribute group is ", a.group, "; it must be positive");
  const int64_t m = wd[0];
  if (m != kDynamicDim && m % a.group != 0)
    return invalid_argument(op, " w of shape ", wd.to_string(), " has ", m,
                            " output channels, which is not divisible by group=", a.group);
  if (x[1] != kDynamicDim && wd[1] != kDynamicDim && x[1] != wd[1] * a.group)
    return invalid_argument(op, " x of shape ", x.to_string(), " has ", x[1], " channels but w of shape ",
                            wd.to_string(), " with group=", a.group, " expects ", wd[1] * a.group);
  for (int i : x_params)
    if (ctx.has_input(i) && !one_element(ctx.input(i).dims))
      return invalid_argument(op, " input ", ctx.input(i).dims.to_string(), " (", i,
                              ") for x must be a scalar: x is quantized per tensor");
  for (int i : w_params) {
    if (!ctx.has_input(i)) continue;
    const Dims& p = ctx.input(i).dims;
    if (!one_element(p) && !(p.rank() == 1 && (p[0] == m || p[0] == kDynamicDim || m == kDynamicDim)))
      return invalid_argument(op, " input ", i, " of shape ", p.to_string(),
                              " must be a scalar or hold one value per output channel (", m, ")");
  }
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, wd));
  Dims out{x[0], m};
  for (int64_t o : win.output) out.push_back(o);
  return out;
}

OpSchema convolution_integer_schema() {
  OpSchema s = make_schema<ConvolutionAttrs>(
      "ConvolutionInteger", "quantization",
      "int32 convolution of (x - x_zero_point) and (w - w_zero_point), int8/uint8 operands (ONNX ConvInteger)");
  s.input_names = {"x", "w", "x_zero_point", "w_zero_point"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "ConvolutionInteger";
    for (auto [zp, operand] : {std::pair{2, 0}, std::pair{3, 1}})
      if (ctx.has_input(zp) && ctx.input(zp).dtype != ctx.input(operand).dtype)
        return invalid_argument(kOp, " zero point ", zp, " has type ", dtype_name(ctx.input(zp).dtype),
                                " but its operand has ", dtype_name(ctx.input(operand).dtype));
    KILN_ASSIGN_OR_RETURN(Dims out, integer_conv_dims(kOp, ctx, 1, {3}, {2}));
    return one_output(DataType::kInt32, out);
  };
  return s;
}

OpSchema quantized_convolution_schema() {
  OpSchema s = make_schema<ConvolutionAttrs>(
      "QuantizedConvolution", "quantization",
      "quantized convolution with int32 bias, requantized with x_scale * w_scale / y_scale (ONNX QLinearConv)");
  s.input_names = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "b"};
  s.min_inputs = 8;
  s.max_inputs = 9;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "QuantizedConvolution";
    for (auto [i, name] : {std::pair{1, "x_scale"}, std::pair{4, "w_scale"}, std::pair{6, "y_scale"}})
      KILN_RETURN_IF_ERROR(check_scale(kOp, ctx, i, name));
    KILN_RETURN_IF_ERROR(check_quantized(kOp, ctx, 7, "y_zero_point"));
    for (auto [zp, operand] : {std::pair{2, 0}, std::pair{5, 3}})
      if (ctx.input(zp).dtype != ctx.input(operand).dtype)
        return invalid_argument(kOp, " zero point ", zp, " has type ", dtype_name(ctx.input(zp).dtype),
                                " but its operand has ", dtype_name(ctx.input(operand).dtype));
    KILN_ASSIGN_OR_RETURN(Dims out, integer_conv_dims(kOp, ctx, 3, {4, 5}, {1, 2, 6, 7}));
    if (ctx.has_input(8)) {
      const TensorDesc& b = ctx.input(8);
      if (b.dtype != DataType::kInt32 || b.dims.rank() != 1 ||
          (b.dims[0] != kDynamicDim && out[1] != kDynamicDim && b.dims[0] != out[1]))
        return invalid_argument(kOp, " bias b must be int32 of shape [", out[1], "], got ", b.to_string());
    }
    return one_output(ctx.input(7).dtype, out);
  };
  return s;
}

KILN_REGISTER_OP(quantize_schema());
KILN_REGISTER_OP(dequantize_schema());
KILN_REGISTER_OP(dynamic_quantize_schema());
KILN_REGISTER_OP(matrix_multiply_integer_schema());
KILN_REGISTER_OP(quantized_matrix_multiply_schema());
KILN_REGISTER_OP(convolution_integer_schema());
KILN_REGISTER_OP(quantized_convolution_schema());

}  // namespace
}  // namespace kiln
