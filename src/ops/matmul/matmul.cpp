#include "ops/matmul/matmul.h"

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {

Result<MatmulShape> matmul_shape(const Dims& a, const Dims& b, const MatrixMultiplyAttrs& attrs) {
  if (a.rank() < 1) return invalid_argument("MatrixMultiply input 'a' must have rank >= 1 but is a scalar (shape [])");
  if (b.rank() < 1) return invalid_argument("MatrixMultiply input 'b' must have rank >= 1 but is a scalar (shape [])");
  MatmulShape s;
  int64_t ka, kb;
  Dims a_batch, b_batch;
  s.a_vector = a.rank() == 1;
  s.b_vector = b.rank() == 1;
  if (s.a_vector) {
    ka = a[0];
  } else {
    const int r = a.rank();
    s.m = attrs.transpose_a ? a[r - 1] : a[r - 2];
    ka = attrs.transpose_a ? a[r - 2] : a[r - 1];
    for (int i = 0; i < r - 2; ++i) a_batch.push_back(a[i]);
  }
  if (s.b_vector) {
    kb = b[0];
  } else {
    const int r = b.rank();
    kb = attrs.transpose_b ? b[r - 1] : b[r - 2];
    s.n = attrs.transpose_b ? b[r - 2] : b[r - 1];
    for (int i = 0; i < r - 2; ++i) b_batch.push_back(b[i]);
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return invalid_argument("MatrixMultiply inner dimensions differ: 'a' of shape ", a.to_string(),
                            attrs.transpose_a ? " (transposed)" : "", " has K = ", ka, " but 'b' of shape ",
                            b.to_string(), attrs.transpose_b ? " (transposed)" : "", " has K = ", kb);
  s.k = ka >= 0 ? ka : kb;
  auto batch = broadcast_dims(a_batch, b_batch);
  if (!batch)
    return invalid_argument("MatrixMultiply batch dims of 'a' ", a.to_string(), " and 'b' ", b.to_string(),
                            " cannot be broadcast together: ", batch.status().message());
  s.batch = *batch;
  const int br = s.batch.rank();
  s.a_batch = Dims::of_rank(br, 1);
  s.b_batch = Dims::of_rank(br, 1);
  for (int i = 0; i < a_batch.rank(); ++i) s.a_batch[br - a_batch.rank() + i] = a_batch[i];
  for (int i = 0; i < b_batch.rank(); ++i) s.b_batch[br - b_batch.rank() + i] = b_batch[i];
  s.out = s.batch;
  if (!s.a_vector) s.out.push_back(s.m);
  if (!s.b_vector) s.out.push_back(s.n);
  return s;
}

namespace {

// The optimizer's epilogue: a fused activation (floating types, no PReLU) and a residual of the output's
// dtype and dims.
Status check_epilogue(const InferContext& ctx, const char* op, const FusedActivation& fused, const TensorDesc& out) {
  if (fused.on && !is_floating(out.dtype))
    return invalid_argument(op, " has a fused activation (", enum_name(fused.kind), ") but computes in ",
                            dtype_name(out.dtype), "; fused activations need a floating type");
  if (fused.on && fused.kind == ActivationKind::kPRelu)
    return invalid_argument(op, " cannot fuse PRelu (its slope is an input); use a separate Activation");
  if (!ctx.has_input(kGemmResidualInput)) return Status::ok();
  const TensorDesc& r = ctx.input(kGemmResidualInput);
  if (r.dtype != out.dtype)
    return invalid_argument(op, " input 'residual' has type ", dtype_name(r.dtype), " but the output has ",
                            dtype_name(out.dtype), "; both must have the same type");
  if (!dims_compatible(r.dims, out.dims))
    return invalid_argument(op, " input 'residual' of shape ", r.dims.to_string(), " must have the output's shape ",
                            out.dims.to_string(), " (it is not broadcast)");
  return Status::ok();
}

constexpr std::initializer_list<DataType> kMatmulTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                                          DataType::kInt32, DataType::kInt64};

OpSchema matrix_multiply_schema() {
  OpSchema s = make_schema<MatrixMultiplyAttrs>(
      "MatrixMultiply", "matmul",
      "numpy matmul with broadcast batches and transposes; Gemm's alpha * a @ b + beta * c (ONNX MatMul, Gemm); "
      "optional fused residual add and activation");
  s.input_names = {"a", "b", "c", "residual"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& attrs = ctx.attrs_as<MatrixMultiplyAttrs>();
    const TensorDesc& a = ctx.input(0);
    const TensorDesc& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(expect_dtype(ctx, 0, kMatmulTypes));
    if (b.dtype != a.dtype)
      return invalid_argument("MatrixMultiply input 'b' has type ", dtype_name(b.dtype), " but 'a' has ",
                              dtype_name(a.dtype), "; both must have the same type");
    KILN_ASSIGN_OR_RETURN(MatmulShape shape, matmul_shape(a.dims, b.dims, attrs));
    if (ctx.has_input(2)) {
      const TensorDesc& c = ctx.input(2);
      if (c.dtype != a.dtype)
        return invalid_argument("MatrixMultiply input 'c' has type ", dtype_name(c.dtype), " but 'a' has ",
                                dtype_name(a.dtype), "; both must have the same type");
      auto both = broadcast_dims(shape.out, c.dims);
      if (!both || *both != shape.out)
        return invalid_argument("MatrixMultiply input 'c' of shape ", c.dims.to_string(),
                                " must broadcast to the output shape ", shape.out.to_string());
    }
    std::vector<TensorDesc> out = one_output(a.dtype, shape.out);
    KILN_RETURN_IF_ERROR(check_epilogue(ctx, "MatrixMultiply", attrs.fused, out[0]));
    return out;
  };
  return s;
}

OpSchema fully_connected_schema() {
  OpSchema s = make_schema<FullyConnectedAttrs>(
      "FullyConnected", "matmul",
      "y = flatten(x, axis) @ weights^T + bias with weights [out, K] (TensorRT fully connected layer); optional fused "
      "residual add and activation");
  s.input_names = {"x", "weights", "bias", "residual"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& attrs = ctx.attrs_as<FullyConnectedAttrs>();
    const TensorDesc& x = ctx.input(0);
    const TensorDesc& w = ctx.input(1);
    if (!is_floating(x.dtype))
      return invalid_argument("FullyConnected needs a floating-point input 'x', got ", dtype_name(x.dtype));
    const int r = x.dims.rank();
    if (attrs.axis < -r || attrs.axis > r)
      return invalid_argument("FullyConnected axis ", attrs.axis, " is out of range for input 'x' of shape ",
                              x.dims.to_string(), " (valid: ", -r, "..", r, ")");
    const int axis = static_cast<int>(attrs.axis < 0 ? attrs.axis + r : attrs.axis);
    if (axis + 1 > kMaxRank)
      return invalid_argument("FullyConnected axis ", attrs.axis, " would give an output of rank ", axis + 1,
                              " but kiln's maximum rank is ", kMaxRank);
    if (w.dtype != x.dtype)
      return invalid_argument("FullyConnected input 'weights' has type ", dtype_name(w.dtype), " but 'x' has ",
                              dtype_name(x.dtype), "; both must have the same type");
    if (w.dims.rank() != 2)
      return invalid_argument("FullyConnected input 'weights' must have rank 2 ([out, K]) but has shape ",
                              w.dims.to_string());
    int64_t k = 1;
    for (int i = axis; i < r; ++i) k = (k < 0 || x.dims[i] < 0) ? kDynamicDim : k * x.dims[i];
    if (k >= 0 && w.dims[1] >= 0 && k != w.dims[1])
      return invalid_argument("FullyConnected input 'x' of shape ", x.dims.to_string(), " flattened from axis ", axis,
                              " has K = ", k, " but 'weights' of shape ", w.dims.to_string(),
                              " expects K = ", w.dims[1]);
    if (ctx.has_input(2)) {
      const TensorDesc& bias = ctx.input(2);
      if (bias.dtype != x.dtype)
        return invalid_argument("FullyConnected input 'bias' has type ", dtype_name(bias.dtype), " but 'x' has ",
                                dtype_name(x.dtype), "; both must have the same type");
      if (bias.dims.rank() != 1 || (bias.dims[0] >= 0 && w.dims[0] >= 0 && bias.dims[0] != w.dims[0]))
        return invalid_argument("FullyConnected input 'bias' must have shape [", w.dims[0], "] but has shape ",
                                bias.dims.to_string());
    }
    Dims out;
    for (int i = 0; i < axis; ++i) out.push_back(x.dims[i]);
    out.push_back(w.dims[0]);
    std::vector<TensorDesc> outs = one_output(x.dtype, out);
    KILN_RETURN_IF_ERROR(check_epilogue(ctx, "FullyConnected", attrs.fused, outs[0]));
    return outs;
  };
  return s;
}

KILN_REGISTER_OP(matrix_multiply_schema());
KILN_REGISTER_OP(fully_connected_schema());

KILN_REGISTER_FOLD_COST("MatrixMultiply", [](const Attrs& attrs, const std::vector<const Tensor*>& in,
                                             const std::vector<TensorDesc>& out) {
  const Dims& a = in[0] ? in[0]->dims() : Dims{};
  const bool ta = static_cast<const MatrixMultiplyAttrs&>(attrs).transpose_a;
  const double k =
      a.rank() == 0 ? 1.0 : static_cast<double>(a[a.rank() == 1 || ta ? std::max(a.rank() - 2, 0) : a.rank() - 1]);
  return output_elements(out) * k;
});

KILN_REGISTER_FOLD_COST("FullyConnected",
                        [](const Attrs&, const std::vector<const Tensor*>& in, const std::vector<TensorDesc>& out) {
                          const Dims& w = in[1] ? in[1]->dims() : Dims{};
                          return output_elements(out) * (w.rank() ? static_cast<double>(w[w.rank() - 1]) : 1.0);
                        });

}  // namespace
}  // namespace kiln
