#include "ops/max_unpool/max_unpool.h"

#include "ops/registry.h"

namespace kiln {

Result<Dims> max_unpool_default_dims(const MaxUnpoolAttrs& a, const Dims& x) {
  const int k = x.rank() - 2;
  if (k < 1) return invalid_argument("MaxUnpool input 'x' must have rank >= 3 [N, C, D1, ...], got ", x.to_string());
  if (static_cast<int>(a.kernel_shape.size()) != k)
    return invalid_argument("MaxUnpool 'kernel_shape' has ", a.kernel_shape.size(), " values; 'x' ", x.to_string(),
                            " has ", k, " spatial dims");
  if (!a.strides.empty() && static_cast<int>(a.strides.size()) != k)
    return invalid_argument("MaxUnpool 'strides' has ", a.strides.size(), " values; it needs ", k);
  if (!a.pads.empty() && static_cast<int>(a.pads.size()) != 2 * k)
    return invalid_argument("MaxUnpool 'pads' has ", a.pads.size(), " values; it needs ", 2 * k);
  Dims out = x;
  for (int i = 0; i < k; ++i) {
    const int64_t kernel = a.kernel_shape[i];
    const int64_t stride = a.strides.empty() ? 1 : a.strides[i];
    const int64_t pad = a.pads.empty() ? 0 : a.pads[i] + a.pads[i + k];
    if (kernel < 1 || stride < 1 || pad < 0)
      return invalid_argument("MaxUnpool needs kernel_shape and strides >= 1 and pads >= 0 (spatial dim ", i, ")");
    if (x[i + 2] == kDynamicDim) {
      out[i + 2] = kDynamicDim;
      continue;
    }
    out[i + 2] = (x[i + 2] - 1) * stride + kernel - pad;
    if (out[i + 2] < 1)
      return invalid_argument("MaxUnpool output spatial dim ", i, " would be ", out[i + 2], " (check the pads)");
  }
  return out;
}

namespace {

OpSchema max_unpool_schema() {
  OpSchema s = make_schema<MaxUnpoolAttrs>("MaxUnpool", "max_unpool",
                                           "Scatters pooled values back to their MaxPool positions (ONNX MaxUnpool)");
  s.input_names = {"x", "indices", "output_shape"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.value_inputs = {2};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<MaxUnpoolAttrs>();
    const Dims& x = ctx.input(0).dims;
    if (ctx.input(1).dtype != DataType::kInt64 && ctx.input(1).dtype != DataType::kInt32)
      return invalid_argument("MaxUnpool input 'indices' must be int64, got ", dtype_name(ctx.input(1).dtype));
    if (!dims_compatible(ctx.input(1).dims, x))
      return invalid_argument("MaxUnpool input 'indices' ", ctx.input(1).dims.to_string(),
                              " must have the shape of 'x' ", x.to_string());
    KILN_ASSIGN_OR_RETURN(Dims out, max_unpool_default_dims(a, x));
    if (ctx.has_input(2)) {
      const TensorDesc& shape = ctx.input(2);
      if (shape.dtype != DataType::kInt64 && shape.dtype != DataType::kInt32)
        return invalid_argument("MaxUnpool input 'output_shape' must be int64, got ", dtype_name(shape.dtype));
      if (shape.dims.rank() != 1 || (shape.dims[0] != kDynamicDim && shape.dims[0] != x.rank()))
        return invalid_argument("MaxUnpool input 'output_shape' must have shape [", x.rank(), "], got ",
                                shape.dims.to_string());
      if (const Tensor* v = ctx.value(2)) {
        const std::vector<int64_t> dims = tensor_to_int64s(*v);
        if (static_cast<int>(dims.size()) != x.rank())
          return invalid_argument("MaxUnpool 'output_shape' has ", dims.size(), " values; it needs ", x.rank());
        for (int i = 0; i < x.rank(); ++i) {
          const bool batch_or_channel = i < 2;
          if (dims[i] < 0 || (batch_or_channel && x[i] != kDynamicDim && dims[i] != x[i]))
            return invalid_argument("MaxUnpool 'output_shape' dim ", i, " is ", dims[i], "; it must be >= 0",
                                    batch_or_channel ? " and keep N and C of 'x' " : "", x.to_string());
          out[i] = dims[i];
        }
      } else {
        for (int i = 2; i < x.rank(); ++i) out[i] = kDynamicDim;
      }
    }
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

KILN_REGISTER_OP(max_unpool_schema());

}  // namespace
}  // namespace kiln
