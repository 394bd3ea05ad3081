#include "ops/convolution/convolution.h"

#include <algorithm>

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {

const char* enum_name(AutoPad pad) {
  switch (pad) {
    case AutoPad::kNotSet: return "notset";
    case AutoPad::kSameUpper: return "same_upper";
    case AutoPad::kSameLower: return "same_lower";
    case AutoPad::kValid: return "valid";
  }
  return "?";
}

namespace {

// Attribute values above this are certainly malformed; the bound keeps all products in int64.
constexpr int64_t kMaxWindowValue = int64_t{1} << 31;

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// `values` with one entry per spatial axis, or `fallback` everywhere when empty; each >= `lo`.
Result<std::vector<int64_t>> per_axis(std::string_view op, const char* name, const std::vector<int64_t>& values,
                                      int rank, int64_t fallback, int64_t lo, int per = 1) {
  if (values.empty()) return std::vector<int64_t>(static_cast<size_t>(rank) * per, fallback);
  if (static_cast<int>(values.size()) != rank * per)
    return invalid_argument(op, " attribute ", name, " ", list_string(values), " has ", values.size(),
                            " entries; expected ", rank * per, per == 2 ? " (begin and end for each of " : " (one per ",
                            per == 2 ? std::to_string(rank) + " spatial axes)" : "spatial axis)");
  for (int64_t v : values)
    if (v < lo || v > kMaxWindowValue)
      return invalid_argument(op, " attribute ", name, " ", list_string(values), " has the value ", v,
                              lo > 0 ? "; all must be positive" : "; all must be non-negative",
                              v > kMaxWindowValue ? " and reasonably small" : "");
  return values;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Spatial dims of `d` from axis 2 on.
Status check_input(std::string_view op, const std::vector<int64_t>& input, const std::vector<int64_t>& kernel) {
  if (kernel.empty() || kernel.size() != input.size())
    return invalid_argument(op, " needs a kernel size for each of the ", input.size(), " spatial axes, got ",
                            list_string(kernel));
  for (int64_t in : input)
    if (in != kDynamicDim && (in < 0 || in > (int64_t{1} << 40)))
      return invalid_argument(op, " input has the spatial size ", in, "; expected a non-negative, sane size");
  return Status::ok();
}

std::vector<int64_t> spatial(const Dims& d) { return std::vector<int64_t>(d.begin() + 2, d.end()); }

// The kernel of a conv node: kernel_shape when set (it must agree with w), else w's spatial dims.
Result<std::vector<int64_t>> resolve_kernel(std::string_view op, const std::vector<int64_t>& kernel_shape,
                                            const Dims& w) {
  const std::vector<int64_t> from_w = spatial(w);
  if (kernel_shape.empty()) {
    for (int64_t k : from_w)
      if (k == kDynamicDim)
        return invalid_argument(op, " needs the kernel size: w has dynamic spatial dims ", w.to_string(),
                                " and kernel_shape is not set");
    return from_w;
  }
  if (kernel_shape.size() != from_w.size())
    return invalid_argument(op, " attribute kernel_shape ", list_string(kernel_shape), " has ", kernel_shape.size(),
                            " entries but w of shape ", w.to_string(), " has ", from_w.size(), " spatial axes");
  for (size_t i = 0; i < from_w.size(); ++i)
    if (from_w[i] != kDynamicDim && from_w[i] != kernel_shape[i])
      return invalid_argument(op, " attribute kernel_shape ", list_string(kernel_shape),
                              " does not match the spatial dims of w ", w.to_string());
  return kernel_shape;
}

Status check_ranks(std::string_view op, const Dims& x, const Dims& w) {
  if (x.rank() < 3)
    return invalid_argument(op, " input x of shape ", x.to_string(),
                            " must have rank 3 or more: [N, C, spatial...] (1-D, 2-D or 3-D)");
  if (w.rank() != x.rank())
    return invalid_argument(op, " input w of shape ", w.to_string(), " must have the rank of x ", x.to_string(), " (",
                            x.rank(), ")");
  return Status::ok();
}

}  // namespace

Result<ConvWindow> conv_window(std::string_view op, const std::vector<int64_t>& input,
                               const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                               const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                               AutoPad auto_pad, bool ceil_mode) {
  const int rank = static_cast<int>(input.size());
  ConvWindow w;
  KILN_RETURN_IF_ERROR(check_input(op, input, kernel));
  KILN_ASSIGN_OR_RETURN(w.kernel, per_axis(op, "kernel_shape", kernel, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(w.strides, per_axis(op, "strides", strides, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, per_axis(op, "dilations", dilations, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> p, per_axis(op, "pads", pads, rank, 0, 0, 2));
  if (auto_pad != AutoPad::kNotSet && std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; }))
    return invalid_argument(op, " attribute pads ", list_string(pads),
                            " cannot be combined with auto_pad=", enum_name(auto_pad),
                            "; leave pads empty or set auto_pad=notset");
  w.pads_begin.assign(p.begin(), p.begin() + rank);
  w.pads_end.assign(p.begin() + rank, p.end());
  w.output.resize(rank);
  for (int i = 0; i < rank; ++i) {
    const int64_t in = input[i], s = w.strides[i], ext = w.extent(i);
    if (in == kDynamicDim) {
      w.output[i] = kDynamicDim;
      continue;
    }
    if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      w.output[i] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (w.output[i] - 1) * s + ext - in);
      const int64_t small = total / 2;
      w.pads_begin[i] = auto_pad == AutoPad::kSameUpper ? small : total - small;
      w.pads_end[i] = total - w.pads_begin[i];
      continue;
    }
    const int64_t padded = in + w.pads_begin[i] + w.pads_end[i];
    if (padded < ext)
      return invalid_argument(op, " window of extent ", ext, " (kernel ", w.kernel[i], ", dilation ", w.dilations[i],
                              ") is larger than the padded input (", in, " + pads ", w.pads_begin[i], " + ",
                              w.pads_end[i], " = ", padded, ") on spatial axis ", i);
    int64_t out = (padded - ext + (ceil_mode ? s - 1 : 0)) / s + 1;
    // With ceil_mode the last window must start inside the input or the begin padding.
    if (ceil_mode && (out - 1) * s >= in + w.pads_begin[i]) --out;
    w.output[i] = out;
  }
  return w;
}

Result<ConvWindow> deconv_window(const std::vector<int64_t>& input, const std::vector<int64_t>& kernel,
                                 const DeconvolutionAttrs& a) {
  constexpr std::string_view kOp = "Deconvolution";
  const int rank = static_cast<int>(input.size());
  ConvWindow w;
  KILN_RETURN_IF_ERROR(check_input(kOp, input, kernel));
  KILN_ASSIGN_OR_RETURN(w.kernel, per_axis(kOp, "kernel_shape", kernel, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(w.strides, per_axis(kOp, "strides", a.strides, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, per_axis(kOp, "dilations", a.dilations, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> p, per_axis(kOp, "pads", a.pads, rank, 0, 0, 2));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, per_axis(kOp, "output_padding", a.output_padding, rank, 0, 0));
  for (int i = 0; i < rank; ++i)
    if (out_pad[i] >= std::max(w.strides[i], w.dilations[i]))
      return invalid_argument(kOp, " attribute output_padding ", list_string(out_pad), " has ", out_pad[i],
                              " on spatial axis ", i, "; it must be smaller than the stride (", w.strides[i],
                              ") or the dilation (", w.dilations[i], ")");
  std::vector<int64_t> out_shape;
  if (!a.output_shape.empty()) {
    const int n = static_cast<int>(a.output_shape.size());
    if (n != rank && n != rank + 2)
      return invalid_argument(kOp, " attribute output_shape ", list_string(a.output_shape), " has ", n,
                              " entries; expected ", rank, " (the spatial sizes) or ", rank + 2, " (the full shape)");
    out_shape.assign(a.output_shape.end() - rank, a.output_shape.end());
    for (int64_t v : out_shape)
      if (v < 0 || v > kMaxWindowValue)
        return invalid_argument(kOp, " attribute output_shape ", list_string(a.output_shape), " has the size ", v,
                                "; sizes must be non-negative and reasonably small");
  } else if (a.auto_pad != AutoPad::kNotSet && std::any_of(p.begin(), p.end(), [](int64_t v) { return v != 0; })) {
    return invalid_argument(kOp, " attribute pads ", list_string(a.pads),
                            " cannot be combined with auto_pad=", enum_name(a.auto_pad),
                            "; leave pads empty or set auto_pad=notset");
  }
  w.pads_begin.assign(p.begin(), p.begin() + rank);
  w.pads_end.assign(p.begin() + rank, p.end());
  w.output.resize(rank);
  const bool same = a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower;
  for (int i = 0; i < rank; ++i) {
    const int64_t in = input[i], s = w.strides[i];
    const bool pads_from_shape = !out_shape.empty() || same;
    if (in == kDynamicDim) {
      w.output[i] = !out_shape.empty() ? out_shape[i] : kDynamicDim;
      if (pads_from_shape) w.pads_begin[i] = w.pads_end[i] = 0;
      continue;
    }
    // The size of the full transposed output, before cropping by the pads.
    const int64_t full = s * (in - 1) + out_pad[i] + w.extent(i);
    if (pads_from_shape) {
      const int64_t target = !out_shape.empty() ? out_shape[i] : in * s;
      const int64_t total = full - target;
      const int64_t half = floor_div(total, 2);
      // ONNX: the odd extra pad goes to the end for same_upper, to the beginning otherwise.
      w.pads_begin[i] = a.auto_pad == AutoPad::kSameUpper ? half : total - half;
      w.pads_end[i] = total - w.pads_begin[i];
      w.output[i] = target;
      continue;
    }
    if (a.auto_pad == AutoPad::kValid) w.pads_begin[i] = w.pads_end[i] = 0;
    const int64_t out = full - w.pads_begin[i] - w.pads_end[i];
    if (out < 0)
      return invalid_argument(kOp, " pads ", w.pads_begin[i], " + ", w.pads_end[i], " on spatial axis ", i,
                              " are larger than the full output size ", full, " (input ", in, ", stride ", s,
                              ", window extent ", w.extent(i), ")");
    w.output[i] = out;
  }
  return w;
}

Dims nhwc_to_nchw(const Dims& d) { return d.rank() == 4 ? Dims{d[0], d[3], d[1], d[2]} : d; }
Dims nchw_to_nhwc(const Dims& d) { return d.rank() == 4 ? Dims{d[0], d[2], d[3], d[1]} : d; }

Dims blocked_to_nchw(const Dims& d) {
  if (d.rank() != 5) return d;
  const int64_t c = d[1] == kDynamicDim || d[4] == kDynamicDim ? kDynamicDim : d[1] * d[4];
  return Dims{d[0], c, d[2], d[3]};
}

Dims nchw_to_blocked(const Dims& d, int64_t block) {
  if (d.rank() != 4 || block <= 0) return d;
  return Dims{d[0], d[1] == kDynamicDim ? kDynamicDim : d[1] / block, d[2], d[3], block};
}

namespace {

// channel_block is 2-D only: x [N, C/B, H, W, B] (or NCHW with plain_input), w [M, C/group, kH, kW].
Status check_one_layout(const ConvolutionAttrs& a) {
  if (a.channels_last && a.channel_block != 0)
    return invalid_argument("Convolution has both channels_last and channel_block ", a.channel_block,
                            "; a layer takes one layout: clear one of them");
  if (a.plain_input && a.channel_block == 0)
    return invalid_argument(
        "Convolution attribute plain_input is set without channel_block; it says that x stays "
        "NCHW while y is in channel blocks: clear it");
  return Status::ok();
}

Status check_channel_block(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  if (a.channel_block < 0 || a.channel_block > 64)
    return invalid_argument("Convolution attribute channel_block is ", a.channel_block, "; it must be 0 to 64");
  const int x_rank = a.plain_input ? 4 : 5;
  if (x.rank() != x_rank || w.rank() != 4)
    return invalid_argument("Convolution with channel_block ", a.channel_block, " is 2-D only: x ",
                            a.plain_input ? "[N, C, H, W]" : "[N, C/B, H, W, B]", " and w [M, C/group, kH, kW], got x ",
                            x.to_string(), " and w ", w.to_string(), "; clear channel_block for other convolutions");
  if (!a.plain_input && x[4] != a.channel_block)
    return invalid_argument("Convolution x of shape ", x.to_string(), " has blocks of ", x[4],
                            " channels; channel_block is ", a.channel_block);
  if (w[0] != kDynamicDim && w[0] % a.channel_block != 0)
    return invalid_argument("Convolution w of shape ", w.to_string(), " has ", w[0], " output channels, not a ",
                            "multiple of channel_block ", a.channel_block);
  return Status::ok();
}

// x as NCHW dims, whatever the layer's layout.
Result<Dims> nchw_input(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  KILN_RETURN_IF_ERROR(check_one_layout(a));
  if (a.channel_block != 0) {
    KILN_RETURN_IF_ERROR(check_channel_block(a, x, w));
    return a.plain_input ? x : blocked_to_nchw(x);
  }
  return a.channels_last ? nhwc_to_nchw(x) : x;
}

// channels_last is 2-D only: x [N, H, W, C] and w [M, kH, kW, C/group].
Status check_channels_last(const Dims& x, const Dims& w) {
  if (x.rank() != 4 || w.rank() != 4)
    return invalid_argument("Convolution with channels_last is 2-D only: x [N, H, W, C] and w [M, kH, kW, C/group] ",
                            "of rank 4, got x ", x.to_string(), " and w ", w.to_string(),
                            "; clear channels_last for 1-D and 3-D convolutions");
  return Status::ok();
}

}  // namespace

Result<ConvWindow> convolution_window(const ConvolutionAttrs& a, const Dims& x_in, const Dims& w_in) {
  KILN_RETURN_IF_ERROR(check_one_layout(a));
  if (a.channels_last) KILN_RETURN_IF_ERROR(check_channels_last(x_in, w_in));
  KILN_ASSIGN_OR_RETURN(const Dims x, nchw_input(a, x_in, w_in));
  const Dims w = a.channels_last ? nhwc_to_nchw(w_in) : w_in;
  KILN_RETURN_IF_ERROR(check_ranks("Convolution", x, w));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, resolve_kernel("Convolution", a.kernel_shape, w));
  return conv_window("Convolution", spatial(x), kernel, a.strides, a.dilations, a.pads, a.auto_pad);
}

Result<ConvWindow> deconvolution_window(const DeconvolutionAttrs& a, const Dims& x, const Dims& w) {
  KILN_RETURN_IF_ERROR(check_ranks("Deconvolution", x, w));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, resolve_kernel("Deconvolution", a.kernel_shape, w));
  return deconv_window(spatial(x), kernel, a);
}

namespace {

Status check_dtypes(std::string_view op, const InferContext& ctx) {
  const DataType dt = ctx.input(0).dtype;
  if (!is_floating(dt)) return invalid_argument(op, " needs a floating-point input x, got ", dtype_name(dt));
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input(i).dtype != dt)
      return invalid_argument(op, " input ",
                              i == 1   ? "w"
                              : i == 2 ? "b"
                                       : "residual",
                              " has dtype ", dtype_name(ctx.input(i).dtype), "; expected ", dtype_name(dt), " like x");
  return Status::ok();
}

Status check_group(std::string_view op, int64_t group) {
  if (group < 1 || group > kMaxWindowValue)
    return invalid_argument(op, " attribute group is ", group, "; it must be a positive number");
  return Status::ok();
}

Status check_bias(std::string_view op, const InferContext& ctx, int64_t m) {
  if (!ctx.has_input(2)) return Status::ok();
  const Dims& b = ctx.input(2).dims;
  if (b.rank() != 1 || (m != kDynamicDim && b[0] != kDynamicDim && b[0] != m))
    return invalid_argument(op, " input b of shape ", b.to_string(), " must have shape [", m,
                            "] (one value per output channel)");
  return Status::ok();
}

// The optional residual (input 3) is added to the output: it must have the output's dims.
Status check_residual(const InferContext& ctx, const Dims& out) {
  if (ctx.num_inputs() < 4 || !ctx.has_input(3)) return Status::ok();
  const Dims& r = ctx.input(3).dims;
  bool same = r.rank() == out.rank();
  for (int i = 0; same && i < r.rank(); ++i) same = r[i] == out[i] || r[i] == kDynamicDim || out[i] == kDynamicDim;
  if (!same)
    return invalid_argument("Convolution input residual of shape ", r.to_string(), " must have the output's shape ",
                            out.to_string());
  return Status::ok();
}

Result<Dims> output_dims(int64_t n, int64_t m, const std::vector<int64_t>& out) {
  std::vector<int64_t> d{n, m};
  d.insert(d.end(), out.begin(), out.end());
  return Dims::from(d);
}

OpSchema convolution_schema() {
  OpSchema s = make_schema<ConvolutionAttrs>(
      "Convolution", "convolution",
      "N-D convolution with strides, pads, dilations, groups and auto_pad (ONNX Conv); the optimizer may "
      "add a residual input and a fused activation: act(conv(x, w) + b + residual)");
  s.input_names = {"x", "w", "b", "residual"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "Convolution";
    const auto& a = ctx.attrs_as<ConvolutionAttrs>();
    KILN_RETURN_IF_ERROR(check_dtypes(kOp, ctx));
    KILN_RETURN_IF_ERROR(check_one_layout(a));
    if (a.channels_last) KILN_RETURN_IF_ERROR(check_channels_last(ctx.input(0).dims, ctx.input(1).dims));
    // The checks below read NCHW dims: channels_last and blocked inputs are viewed that way, the output turned back.
    KILN_ASSIGN_OR_RETURN(const Dims x, nchw_input(a, ctx.input(0).dims, ctx.input(1).dims));
    const Dims w = a.channels_last ? nhwc_to_nchw(ctx.input(1).dims) : ctx.input(1).dims;
    KILN_RETURN_IF_ERROR(check_ranks(kOp, x, w));
    KILN_RETURN_IF_ERROR(check_group(kOp, a.group));
    const int64_t c = x[1], m = w[0], wc = w[1];
    if (m != kDynamicDim && m % a.group != 0)
      return invalid_argument(kOp, " w of shape ", w.to_string(), " has ", m,
                              " output channels, which is not divisible by group=", a.group);
    if (c != kDynamicDim && wc != kDynamicDim && c != wc * a.group)
      return invalid_argument(kOp, " x of shape ", x.to_string(), " has ", c, " channels but w of shape ",
                              w.to_string(), " with group=", a.group, " expects ", wc, " * ", a.group, " = ",
                              wc * a.group);
    KILN_RETURN_IF_ERROR(check_bias(kOp, ctx, m));
    KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, ctx.input(0).dims, ctx.input(1).dims));
    KILN_ASSIGN_OR_RETURN(Dims out, output_dims(x[0], m, win.output));
    if (a.channels_last) out = nchw_to_nhwc(out);
    if (a.channel_block != 0) out = nchw_to_blocked(out, a.channel_block);
    KILN_RETURN_IF_ERROR(check_residual(ctx, out));
    if (a.fused.on && a.fused.kind == ActivationKind::kPRelu)
      return invalid_argument(kOp, " attribute fused_kind is prelu, which cannot be fused (its slope is an input)");
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

OpSchema deconvolution_schema() {
  OpSchema s = make_schema<DeconvolutionAttrs>(
      "Deconvolution", "convolution",
      "N-D transposed convolution with output_padding, output_shape, groups and auto_pad (ONNX ConvTranspose)");
  s.input_names = {"x", "w", "b"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "Deconvolution";
    const auto& a = ctx.attrs_as<DeconvolutionAttrs>();
    KILN_RETURN_IF_ERROR(check_dtypes(kOp, ctx));
    const Dims& x = ctx.input(0).dims;
    const Dims& w = ctx.input(1).dims;
    KILN_RETURN_IF_ERROR(check_ranks(kOp, x, w));
    KILN_RETURN_IF_ERROR(check_group(kOp, a.group));
    const int64_t c = x[1], wc = w[0];
    if (c != kDynamicDim && wc != kDynamicDim && c != wc)
      return invalid_argument(kOp, " x of shape ", x.to_string(), " has ", c, " channels but w of shape ",
                              w.to_string(), " expects ", wc, " (w is [C, M / group, kernel...])");
    if (wc != kDynamicDim && wc % a.group != 0)
      return invalid_argument(kOp, " w of shape ", w.to_string(), " has ", wc,
                              " input channels, which is not divisible by group=", a.group);
    const int64_t m = w[1] == kDynamicDim ? kDynamicDim : w[1] * a.group;
    KILN_RETURN_IF_ERROR(check_bias(kOp, ctx, m));
    KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(a, x, w));
    KILN_ASSIGN_OR_RETURN(Dims out, output_dims(x[0], m, win.output));
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

KILN_REGISTER_OP(convolution_schema());
KILN_REGISTER_OP(deconvolution_schema());

KILN_REGISTER_FOLD_COST("Convolution", [](const Attrs&, const std::vector<const Tensor*>& in,
                                          const std::vector<TensorDesc>& out) {
  const Tensor* w = in[1];
  const double per = w && w->dims().rank() && w->dims()[0] > 0 ? static_cast<double>(w->numel()) / w->dims()[0] : 1.0;
  return (output_elements(out) + (in[0] ? static_cast<double>(in[0]->numel()) : 0.0)) * per;
});

KILN_REGISTER_FOLD_COST("Deconvolution", [](const Attrs&, const std::vector<const Tensor*>& in,
                                            const std::vector<TensorDesc>& out) {
  const Tensor* w = in[1];
  const double per = w && w->dims().rank() && w->dims()[0] > 0 ? static_cast<double>(w->numel()) / w->dims()[0] : 1.0;
  return (output_elements(out) + (in[0] ? static_cast<double>(in[0]->numel()) : 0.0)) * per;
});

}  // namespace
}  // namespace kiln
