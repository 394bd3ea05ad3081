// Reference DFT, STFT and MelWeightMatrix: direct sums accumulated in double.
#include "kernels/ref/signal.h"

#include <cmath>

namespace kiln {
namespace signal {

namespace {
std::optional<int64_t> scalar_input(const KernelContext& ctx, int i) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return std::nullopt;
  return tensor_to_int64s(ctx.src[i])[0];
}
}  // namespace

Result<DftShape> dft_problem(const KernelContext& ctx) {
  return dft_shape(ctx.src[0].dims(), ctx.attrs<DftAttrs>(), scalar_input(ctx, 1));
}

Result<StftShape> stft_problem(const KernelContext& ctx) {
  std::optional<int64_t> window;
  if (ctx.src.size() > 2 && ctx.src[2].defined()) window = ctx.src[2].dims()[0];
  return stft_shape(ctx.src[0].dims(), ctx.attrs<StftAttrs>().onesided, scalar_input(ctx, 1), window,
                    scalar_input(ctx, 3));
}

Result<std::vector<double>> mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate,
                                              double lower_edge_hertz, double upper_edge_hertz) {
  if (num_mel_bins < 1 || dft_length < 1 || sample_rate < 1)
    return invalid_argument("MelWeightMatrix needs positive num_mel_bins, dft_length and sample_rate");
  const int64_t spectrum_bins = dft_length / 2 + 1;
  const double low_mel = 2595.0 * std::log10(1.0 + lower_edge_hertz / 700.0);
  const double high_mel = 2595.0 * std::log10(1.0 + upper_edge_hertz / 700.0);
  const double step = (high_mel - low_mel) / static_cast<double>(num_mel_bins + 2);
  // Band edges (left, center, right of each triangle) as spectrum bin indices.
  std::vector<int64_t> edge(static_cast<size_t>(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595.0) - 1.0);
    edge[i] =
        static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> out(static_cast<size_t>(spectrum_bins * num_mel_bins), 0.0);
  auto put = [&](int64_t j, int64_t i, double v) {
    if (j >= 0 && j < spectrum_bins) out[j * num_mel_bins + i] = v;
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
    if (center == left) {
      put(center, i, 1.0);
    } else {
      for (int64_t j = left; j <= center; ++j)
        put(j, i, static_cast<double>(j - left) / static_cast<double>(center - left));
    }
    for (int64_t j = center; j < right; ++j)
      put(j, i, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  return out;
}

}  // namespace signal

namespace {

// One transform: `in` holds `len` complex samples at stride `in_stride` (elements of 2 floats or 1
// real); writes `bins` complex values at stride `out_stride`.
void direct_dft(const float* in, int64_t len, int64_t in_stride, int64_t components, int64_t n, int64_t bins,
                bool inverse, float* out, int64_t out_stride) {
  const int64_t used = std::min(len, n);
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0, im = 0;
    for (int64_t j = 0; j < used; ++j) {
      const double ang = signal::twiddle_angle(j, k, n);
      const double c = std::cos(ang), s = sign * std::sin(ang);
      const double xr = in[j * in_stride], xi = components == 2 ? in[j * in_stride + 1] : 0.0;
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    out[k * out_stride] = static_cast<float>(re * scale);
    out[k * out_stride + 1] = static_cast<float>(im * scale);
  }
}

Status run_dft(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DftShape s, signal::dft_problem(ctx));
  const auto& a = ctx.attrs<DftAttrs>();
  const float* x = ctx.src[0].data<float>();
  float* y = ctx.dst[0].data<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i)
      direct_dft(x + (o * s.length * s.inner + i) * s.components, s.length, s.inner * s.components, s.components, s.n,
                 s.bins, a.inverse, y + (o * s.bins * s.inner + i) * 2, s.inner * 2);
  return Status::ok();
}

Status run_stft(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(StftShape s, signal::stft_problem(ctx));
  const float* x = ctx.src[0].data<float>();
  const float* window = ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
  float* y = ctx.dst[0].data<float>();
  std::vector<float> frame(static_cast<size_t>(s.frame_length * s.components));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t f = 0; f < s.frames; ++f) {
      const float* src = x + (b * s.length + f * s.frame_step) * s.components;
      for (int64_t j = 0; j < s.frame_length; ++j)
        for (int64_t c = 0; c < s.components; ++c)
          frame[j * s.components + c] = src[j * s.components + c] * (window ? window[j] : 1.f);
      direct_dft(frame.data(), s.frame_length, s.components, s.components, s.frame_length, s.bins, false,
                 y + (b * s.frames + f) * s.bins * 2, 2);
    }
  return Status::ok();
}

Status run_mel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> m,
                        signal::mel_weight_matrix(tensor_to_int64s(ctx.src[0])[0], tensor_to_int64s(ctx.src[1])[0],
                                                  tensor_to_int64s(ctx.src[2])[0], ctx.src[3].at(0), ctx.src[4].at(0)));
  Tensor& y = ctx.dst[0];
  if (static_cast<int64_t>(m.size()) != y.numel())
    return internal_error("MelWeightMatrix output has ", y.numel(), " elements, expected ", m.size());
  for (int64_t i = 0; i < y.numel(); ++i) y.set(i, m[i]);
  return Status::ok();
}

Status float_data(const OpCall& call) {
  if (call.inputs[0].dtype != DataType::kFloat32)
    return unsupported("the kernel computes float32 signals, got ", dtype_name(call.inputs[0].dtype));
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({.name = "ref.dft",
                                           .op = "DFT",
                                           .backend = Backend::kRef,
                                           .priority = 0,
                                           .supports = float_data,
                                           .create = stateless(run_dft)}));
KILN_REGISTER_KERNEL(with_float32_compute({.name = "ref.stft",
                                           .op = "STFT",
                                           .backend = Backend::kRef,
                                           .priority = 0,
                                           .supports = float_data,
                                           .create = stateless(run_stft)}));
KILN_REGISTER_KERNEL(KernelImpl{.name = "ref.mel_weight_matrix",
                                .op = "MelWeightMatrix",
                                .backend = Backend::kRef,
                                .priority = 0,
                                .supports = [](const OpCall&) { return Status::ok(); },
                                .create = stateless(run_mel)});

}  // namespace
}  // namespace kiln
