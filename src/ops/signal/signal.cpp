#include "ops/signal/signal.h"

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {

Result<DftShape> dft_shape(const Dims& x, const DftAttrs& a, std::optional<int64_t> dft_length) {
  const int r = x.rank();
  if (r < 2)
    return invalid_argument("DFT input of shape ", x.to_string(),
                            " must have rank 2 or more: [batch, signal dims..., 1 or 2]");
  const int64_t c = x[r - 1];
  if (c != 1 && c != 2 && c != kDynamicDim)
    return invalid_argument("DFT input of shape ", x.to_string(),
                            " must end in 1 (real) or 2 (complex: real, imaginary), not ", c);
  if (a.axis < -r || a.axis > r - 2 || a.axis == -1)
    return invalid_argument("DFT axis ", a.axis, " is out of range for input of shape ", x.to_string(), " (valid: ", -r,
                            "..-2 and 0..", r - 2, "; the last dim holds the complex components)");
  DftShape s;
  s.axis = static_cast<int>(a.axis < 0 ? a.axis + r : a.axis);
  s.components = c;
  s.length = x[s.axis];
  for (int i = 0; i < s.axis; ++i) s.outer *= x[i];
  for (int i = s.axis + 1; i < r - 1; ++i) s.inner *= x[i];
  if (a.inverse && a.onesided)
    return unsupported(
        "DFT with inverse=1 and onesided=1 (a complex-to-real inverse) is not supported; "
        "give the full spectrum with onesided=0");
  if (dft_length) {
    if (*dft_length < 1 || *dft_length > (int64_t{1} << 31))
      return invalid_argument("DFT dft_length is ", *dft_length, "; it must be positive");
    s.n = *dft_length;
  } else {
    s.n = s.length;
  }
  s.bins = s.n == kDynamicDim ? kDynamicDim : (a.onesided ? s.n / 2 + 1 : s.n);
  if (s.n == 0) return invalid_argument("DFT over an empty axis ", s.axis, " of shape ", x.to_string());
  s.out = x;
  s.out[s.axis] = s.bins;
  s.out[r - 1] = 2;
  return s;
}

Result<StftShape> stft_shape(const Dims& signal, bool onesided, std::optional<int64_t> frame_step,
                             std::optional<int64_t> window_length, std::optional<int64_t> frame_length) {
  if (signal.rank() != 3 || (signal[2] != 1 && signal[2] != 2 && signal[2] != kDynamicDim))
    return invalid_argument("STFT signal of shape ", signal.to_string(),
                            " must be [batch, length, 1 or 2] (real, or complex as real and imaginary)");
  StftShape s;
  s.batch = signal[0];
  s.length = signal[1];
  s.components = signal[2];
  if (window_length && frame_length && *window_length != kDynamicDim && *window_length != *frame_length)
    return invalid_argument("STFT window has ", *window_length, " samples but frame_length is ", *frame_length,
                            "; they must agree");
  if (!window_length && !frame_length && frame_step)
    return invalid_argument("STFT needs a window or a frame_length to know the frame size");
  s.frame_length = frame_length ? *frame_length : window_length ? *window_length : kDynamicDim;
  s.frame_step = frame_step ? *frame_step : kDynamicDim;
  if (frame_step && *frame_step < 1)
    return invalid_argument("STFT frame_step is ", *frame_step, "; it must be positive");
  if (s.frame_length != kDynamicDim && s.frame_length < 1)
    return invalid_argument("STFT frame_length is ", s.frame_length, "; it must be positive");
  if (s.frame_length != kDynamicDim && s.length != kDynamicDim && s.frame_length > s.length)
    return invalid_argument("STFT frame_length ", s.frame_length, " is longer than the signal (", s.length, ")");
  const bool known = s.frame_length != kDynamicDim && s.frame_step != kDynamicDim && s.length != kDynamicDim;
  s.frames = known ? (s.length - s.frame_length) / s.frame_step + 1 : kDynamicDim;
  s.bins = s.frame_length == kDynamicDim ? kDynamicDim : (onesided ? s.frame_length / 2 + 1 : s.frame_length);
  s.out = Dims{s.batch, s.frames, s.bins, 2};
  return s;
}

namespace {

std::optional<int64_t> scalar_value(const InferContext& ctx, int i) {
  const Tensor* t = ctx.value(i);
  if (!t || t->numel() != 1) return std::nullopt;
  return tensor_to_int64s(*t)[0];
}

Status expect_scalar_int(const InferContext& ctx, int i, std::string_view op, std::string_view what) {
  if (!ctx.has_input(i)) return Status::ok();
  const TensorDesc& t = ctx.input(i);
  if (!is_integer(t.dtype) || t.dims.numel() != 1)
    return invalid_argument(op, " input ", what, " must be an integer scalar, got ", t.to_string());
  return Status::ok();
}

OpSchema dft_schema() {
  OpSchema s = make_schema<DftAttrs>(
      "DFT", "signal", "discrete Fourier transform along one axis, real or complex, inverse, onesided (ONNX DFT)");
  s.input_names = {"input", "dft_length"};
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.value_inputs = {1};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype)) return invalid_argument("DFT needs a floating-point input, got ", dtype_name(x.dtype));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, 1, "DFT", "dft_length"));
    std::optional<int64_t> len = scalar_value(ctx, 1);
    if (ctx.has_input(1) && !len) len = kDynamicDim;
    if (len && *len == kDynamicDim) {
      KILN_ASSIGN_OR_RETURN(DftShape shape, dft_shape(x.dims, ctx.attrs_as<DftAttrs>(), std::nullopt));
      shape.out[shape.axis] = kDynamicDim;
      return one_output(x.dtype, shape.out);
    }
    KILN_ASSIGN_OR_RETURN(DftShape shape, dft_shape(x.dims, ctx.attrs_as<DftAttrs>(), len));
    return one_output(x.dtype, shape.out);
  };
  return s;
}

OpSchema stft_schema() {
  OpSchema s = make_schema<StftAttrs>(
      "STFT", "signal", "short-time Fourier transform with frame step, window and frame length (ONNX STFT)");
  s.input_names = {"signal", "frame_step", "window", "frame_length"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.value_inputs = {1, 3};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype)) return invalid_argument("STFT needs a floating-point signal, got ", dtype_name(x.dtype));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, 1, "STFT", "frame_step"));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, 3, "STFT", "frame_length"));
    std::optional<int64_t> window;
    if (ctx.has_input(2)) {
      const TensorDesc& w = ctx.input(2);
      if (w.dims.rank() != 1 || w.dtype != x.dtype)
        return invalid_argument("STFT window must be 1-D with the signal's type ", dtype_name(x.dtype), ", got ",
                                w.to_string());
      window = w.dims[0];
    }
    std::optional<int64_t> step = scalar_value(ctx, 1), length = scalar_value(ctx, 3);
    if (!ctx.has_input(3) && !window) return invalid_argument("STFT needs a window or a frame_length");
    if (ctx.has_input(3) && !length) length = kDynamicDim;
    if (length && *length == kDynamicDim) {
      length.reset();
      if (!window) window = kDynamicDim;
    }
    KILN_ASSIGN_OR_RETURN(StftShape shape,
                          stft_shape(x.dims, ctx.attrs_as<StftAttrs>().onesided, step, window, length));
    return one_output(x.dtype, shape.out);
  };
  return s;
}

OpSchema mel_weight_matrix_schema() {
  OpSchema s = make_schema<MelWeightMatrixAttrs>(
      "MelWeightMatrix", "signal",
      "[dft_length / 2 + 1, num_mel_bins] triangular mel filter bank (ONNX MelWeightMatrix)");
  s.input_names = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.value_inputs = {0, 1, 2, 3, 4};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    constexpr std::string_view kOp = "MelWeightMatrix";
    const char* names[] = {"num_mel_bins", "dft_length", "sample_rate"};
    for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, i, kOp, names[i]));
    for (int i : {3, 4})
      if (!is_floating(ctx.input(i).dtype) || ctx.input(i).dims.numel() != 1)
        return invalid_argument(kOp, " input ", i == 3 ? "lower_edge_hertz" : "upper_edge_hertz",
                                " must be a floating-point scalar, got ", ctx.input(i).to_string());
    const auto& a = ctx.attrs_as<MelWeightMatrixAttrs>();
    if (a.dtype == DataType::kBool || a.dtype == DataType::kFp8E4M3)
      return invalid_argument(kOp, " cannot produce ", dtype_name(a.dtype));
    const auto bins = scalar_value(ctx, 0), len = scalar_value(ctx, 1), rate = scalar_value(ctx, 2);
    if (bins && *bins < 1) return invalid_argument(kOp, " num_mel_bins is ", *bins, "; it must be positive");
    if (len && *len < 1) return invalid_argument(kOp, " dft_length is ", *len, "; it must be positive");
    if (rate && *rate < 1) return invalid_argument(kOp, " sample_rate is ", *rate, "; it must be positive");
    const Tensor *lo = ctx.value(3), *hi = ctx.value(4);
    if (lo && hi && rate) {
      const double l = lo->at(0), h = hi->at(0);
      if (!(l >= 0 && l < h && h <= *rate / 2.0 + 1e-6))
        return invalid_argument(kOp, " needs 0 <= lower_edge_hertz < upper_edge_hertz <= sample_rate / 2, got ", l,
                                ", ", h, " and sample rate ", *rate);
    }
    return one_output(a.dtype, Dims{len ? *len / 2 + 1 : kDynamicDim, bins ? *bins : kDynamicDim});
  };
  return s;
}

KILN_REGISTER_OP(dft_schema());
KILN_REGISTER_OP(stft_schema());
KILN_REGISTER_OP(mel_weight_matrix_schema());

KILN_REGISTER_FOLD_COST("DFT", [](const Attrs& attrs, const std::vector<const Tensor*>& in,
                                  const std::vector<TensorDesc>& out) {
  // The reference transform is direct: every output element sums over the input length.
  if (!in[0]) return output_elements(out);
  auto shape = dft_shape(in[0]->dims(), static_cast<const DftAttrs&>(attrs), std::nullopt);
  return output_elements(out) * (shape ? static_cast<double>(std::max<int64_t>(shape->length, 1)) : 1.0);
});

}  // namespace
}  // namespace kiln
