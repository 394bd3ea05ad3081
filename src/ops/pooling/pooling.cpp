#include "ops/pooling/pooling.h"

#include "ops/registry.h"

namespace kiln {

const char* enum_name(PoolingMode mode) {
  switch (mode) {
    case PoolingMode::kMax: return "max";
    case PoolingMode::kAverage: return "average";
    case PoolingMode::kLp: return "lp";
  }
  return "?";
}

const char* enum_name(PoolingAutoPad pad) {
  switch (pad) {
    case PoolingAutoPad::kNotSet: return "NOTSET";
    case PoolingAutoPad::kSameUpper: return "SAME_UPPER";
    case PoolingAutoPad::kSameLower: return "SAME_LOWER";
    case PoolingAutoPad::kValid: return "VALID";
  }
  return "?";
}

namespace {

constexpr int64_t kMaxGeometryValue = int64_t{1} << 30;

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += str_cat(i ? ", " : "", v[i]);
  return s + "]";
}

// Checks an optional per-dim list: empty, or `count` values each in [lo, kMaxGeometryValue].
Status check_list(const char* name, const std::vector<int64_t>& v, size_t count, int64_t lo) {
  if (v.empty()) return Status::ok();
  if (v.size() != count)
    return invalid_argument("Pooling ", name, " ", list_string(v), " must have ", count, " values (",
                            name == std::string("pads") ? "begin and end per spatial dim" : "one per spatial dim", ")");
  for (int64_t x : v)
    if (x < lo || x > kMaxGeometryValue)
      return invalid_argument("Pooling ", name, " ", list_string(v), " must hold values in [", lo, ", ",
                              kMaxGeometryValue, "]");
  return Status::ok();
}

}  // namespace

Result<int64_t> pooling_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                                    int64_t pad_end, bool ceil_mode) {
  const int64_t extent = (kernel - 1) * dilation + 1;
  const int64_t span = in + pad_begin + pad_end - extent;
  if (span < 0)
    return invalid_argument("the pooling window (extent ", extent, ") is larger than the padded input (", in, " + ",
                            pad_begin, " + ", pad_end, ")");
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // Under ceil_mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

Result<PoolingGeometry> pooling_geometry(const PoolingAttrs& a, const Dims& x_in) {
  if (a.channels_last && x_in.rank() != 4)
    return invalid_argument("Pooling with channels_last is 2-D only: x [N, H, W, C] of rank 4, got ", x_in.to_string(),
                            "; clear channels_last for 1-D and 3-D pooling");
  if (a.channels_last && a.return_indices)
    return invalid_argument("Pooling with channels_last has no return_indices (the indices are NCHW offsets)");
  // The geometry reads N, C, spatial...: a channels_last input is viewed that way.
  const Dims x = a.channels_last ? Dims{x_in[0], x_in[3], x_in[1], x_in[2]} : x_in;
  const int max_rank = a.global ? kMaxRank : 5;
  if (x.rank() < 3 || x.rank() > max_rank)
    return invalid_argument("Pooling input x must have rank 3 to ", max_rank, " (N, C, ", a.global ? "" : "1 to 3 ",
                            "spatial dims) but has shape ", x.to_string());
  PoolingGeometry g;
  g.spatial = x.rank() - 2;
  g.batch = x[0];
  g.channels = x[1];
  const size_t n = static_cast<size_t>(g.spatial);
  if (a.mode == PoolingMode::kLp && (a.p < 1 || a.p > 64))
    return invalid_argument("Pooling p = ", a.p, " must be in [1, 64]");
  if (a.return_indices && a.mode != PoolingMode::kMax)
    return invalid_argument("Pooling return_indices needs mode max, not ", enum_name(a.mode));
  if (a.global) {
    if (!a.kernel_shape.empty() || !a.strides.empty() || !a.pads.empty() || !a.dilations.empty() ||
        a.auto_pad != PoolingAutoPad::kNotSet)
      return invalid_argument(
          "global Pooling takes no kernel_shape, strides, pads, dilations or auto_pad: the window is the whole input");
    for (size_t i = 0; i < n; ++i) {
      g.in[i] = x[static_cast<int>(i) + 2];
      if (g.in[i] == 0) return invalid_argument("global Pooling needs non-empty spatial dims, got ", x.to_string());
      g.kernel[i] = g.in[i];
      g.stride[i] = g.dilation[i] = 1;
      g.out[i] = 1;
    }
    return g;
  }
  if (a.kernel_shape.size() != n)
    return invalid_argument("Pooling kernel_shape ", list_string(a.kernel_shape), " must have ", n,
                            " values, one per spatial dim of input shape ", x.to_string());
  KILN_RETURN_IF_ERROR(check_list("kernel_shape", a.kernel_shape, n, 1));
  KILN_RETURN_IF_ERROR(check_list("strides", a.strides, n, 1));
  KILN_RETURN_IF_ERROR(check_list("dilations", a.dilations, n, 1));
  KILN_RETURN_IF_ERROR(check_list("pads", a.pads, 2 * n, 0));
  if (a.auto_pad != PoolingAutoPad::kNotSet)
    for (int64_t p : a.pads)
      if (p != 0)
        return invalid_argument("Pooling pads ", list_string(a.pads), " cannot be combined with auto_pad ",
                                enum_name(a.auto_pad));
  for (size_t i = 0; i < n; ++i) {
    g.in[i] = x[static_cast<int>(i) + 2];
    g.kernel[i] = a.kernel_shape[i];
    g.stride[i] = a.strides.empty() ? 1 : a.strides[i];
    g.dilation[i] = a.dilations.empty() ? 1 : a.dilations[i];
    g.pad_begin[i] = a.pads.empty() ? 0 : a.pads[i];
    g.pad_end[i] = a.pads.empty() ? 0 : a.pads[i + n];
    if (g.pad_begin[i] >= g.kernel[i] || g.pad_end[i] >= g.kernel[i])
      return invalid_argument("Pooling pads ", list_string(a.pads), " must be smaller than kernel_shape ",
                              list_string(a.kernel_shape), " in each dim");
    if (g.in[i] == kDynamicDim) {
      g.out[i] = kDynamicDim;
      continue;
    }
    switch (a.auto_pad) {
      case PoolingAutoPad::kNotSet:
      case PoolingAutoPad::kValid: {
        auto out = pooling_output_size(g.in[i], g.kernel[i], g.stride[i], g.dilation[i], g.pad_begin[i], g.pad_end[i],
                                       a.ceil_mode);
        if (!out)
          return invalid_argument("Pooling spatial dim ", i, " of input shape ", x.to_string(), ": ",
                                  out.status().message());
        g.out[i] = *out;
        break;
      }
      case PoolingAutoPad::kSameUpper:
      case PoolingAutoPad::kSameLower: {
        g.out[i] = (g.in[i] + g.stride[i] - 1) / g.stride[i];
        const int64_t total = std::max<int64_t>((g.out[i] - 1) * g.stride[i] + g.extent(i) - g.in[i], 0);
        const int64_t small = total / 2;
        g.pad_begin[i] = a.auto_pad == PoolingAutoPad::kSameUpper ? small : total - small;
        g.pad_end[i] = total - g.pad_begin[i];
        if (g.in[i] == 0) return invalid_argument("Pooling input has an empty spatial dim: ", x.to_string());
        break;
      }
    }
  }
  return g;
}

namespace {

OpSchema pooling_schema() {
  OpSchema s = make_schema<PoolingAttrs>(
      "Pooling", "pooling", "max, average and Lp pooling, 1-D to 3-D, global variants, ceil mode, max indices");
  s.input_names = {"x"};
  s.min_inputs = 1;
  s.max_inputs = 1;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<PoolingAttrs>();
    const TensorDesc& x = ctx.input(0);
    const bool int8 = x.dtype == DataType::kInt8 || x.dtype == DataType::kUInt8;
    if (!is_floating(x.dtype) && !(int8 && a.mode == PoolingMode::kMax))
      return invalid_argument("Pooling mode ", enum_name(a.mode), " needs a floating-point input",
                              a.mode == PoolingMode::kMax ? " (or int8/uint8)" : "", ", got ", dtype_name(x.dtype));
    KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x.dims));
    Dims out = Dims::of_rank(x.dims.rank());
    out[0] = g.batch;
    out[1] = g.channels;
    for (int i = 0; i < g.spatial; ++i) out[i + 2] = g.out[i];
    if (a.channels_last) out = Dims{g.batch, g.out[0], g.out[1], g.channels};
    std::vector<TensorDesc> outputs = one_output(x.dtype, out);
    if (a.return_indices) outputs.push_back({DataType::kInt64, out, true});
    return outputs;
  };
  return s;
}

KILN_REGISTER_OP(pooling_schema());

}  // namespace
}  // namespace kiln
