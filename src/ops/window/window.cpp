#include "ops/window/window.h"

#include <cmath>

#include "ops/registry.h"

namespace kiln {

const char* enum_name(WindowKind kind) {
  switch (kind) {
    case WindowKind::kHann: return "hann";
    case WindowKind::kHamming: return "hamming";
    case WindowKind::kBlackman: return "blackman";
  }
  return "?";
}

double window_value(const WindowAttrs& a, int64_t size, int64_t k) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const int64_t n = a.periodic ? size : size - 1;
  if (n <= 0) return 1.0;
  const double x = kTwoPi * static_cast<double>(k) / static_cast<double>(n);
  switch (a.kind) {
    case WindowKind::kHann: return 0.5 - 0.5 * std::cos(x);
    case WindowKind::kHamming: return 25.0 / 46.0 - 21.0 / 46.0 * std::cos(x);
    case WindowKind::kBlackman: return 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2.0 * x);
  }
  return 0.0;
}

namespace {

OpSchema window_schema() {
  OpSchema s = make_schema<WindowAttrs>("Window", "window",
                                        "Hann, Hamming and Blackman windows, periodic or symmetric (ONNX "
                                        "HannWindow, HammingWindow, BlackmanWindow)");
  s.input_names = {"size"};
  s.value_inputs = {0};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<WindowAttrs>();
    const TensorDesc& size = ctx.input(0);
    if (!is_integer(size.dtype) || size.dims.numel() != 1)
      return invalid_argument("Window input size must be an integer scalar, got ", size.to_string());
    if (a.dtype == DataType::kBool || a.dtype == DataType::kFp8E4M3)
      return invalid_argument("Window cannot produce ", dtype_name(a.dtype));
    int64_t n = kDynamicDim;
    if (const Tensor* v = ctx.value(0)) {
      n = tensor_to_int64s(*v)[0];
      if (n < 0 || n > (int64_t{1} << 31))
        return invalid_argument("Window size is ", n, "; it must be a non-negative, sane length");
    }
    return one_output(a.dtype, Dims{n});
  };
  return s;
}

KILN_REGISTER_OP(window_schema());

}  // namespace
}  // namespace kiln
