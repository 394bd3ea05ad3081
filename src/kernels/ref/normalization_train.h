#pragma once
// Per-channel (batch norm) and per-row (layer norm) pieces of the training normalization kernels, in double
// sums, shared by the reference and CPU kernels (which run channels or rows in parallel).
#include <cmath>
#include <cstdint>

namespace kiln::ref {

/// x viewed as [n, c, inner]: the elements of one channel are at (b * c + ch) * inner + i.
struct ChannelView {
  int64_t n = 1, c = 1, inner = 1;
  int64_t count() const { return n * inner; }
  template <class F>
  void each(int64_t ch, F&& f) const {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0, base = (b * c + ch) * inner; i < inner; ++i) f(base + i);
  }
};

/// Batch mean and variance (no Bessel correction) of channel `ch`.
inline void channel_moments(const ChannelView& v, const float* x, int64_t ch, double& mean, double& var) {
  double sum = 0, sq = 0;
  v.each(ch, [&](int64_t i) { sum += x[i]; });
  const double cnt = static_cast<double>(v.count());
  mean = cnt > 0 ? sum / cnt : 0.0;
  v.each(ch, [&](int64_t i) { sq += (x[i] - mean) * (x[i] - mean); });
  var = cnt > 0 ? sq / cnt : 0.0;
}

/// BatchNormalizationTraining for channel `ch`.
struct BatchNormTrainingIo {
  const float *x, *scale, *bias, *running_mean, *running_var;
  float *y, *new_mean, *new_var, *saved_mean, *saved_inv_std;
};
inline void batch_norm_training_channel(const ChannelView& v, const BatchNormTrainingIo& io, float epsilon,
                                        float momentum, int64_t ch) {
  double mean, var;
  channel_moments(v, io.x, ch, mean, var);
  const double inv_std = 1.0 / std::sqrt(var + epsilon);
  const double s = io.scale[ch] * inv_std, t = io.bias[ch] - mean * s;
  v.each(ch, [&](int64_t i) { io.y[i] = static_cast<float>(io.x[i] * s + t); });
  io.new_mean[ch] = static_cast<float>(momentum * io.running_mean[ch] + (1.0 - momentum) * mean);
  io.new_var[ch] = static_cast<float>(momentum * io.running_var[ch] + (1.0 - momentum) * var);
  io.saved_mean[ch] = static_cast<float>(mean);
  io.saved_inv_std[ch] = static_cast<float>(inv_std);
}

/// BatchNormalizationBackward for channel `ch`; dmean and dvar only with global statistics.
struct BatchNormBackwardIo {
  const float *dy, *x, *scale, *mean, *stat;
  float *dx, *dscale, *dbias, *dmean, *dvar;
};
inline void batch_norm_backward_channel(const ChannelView& v, const BatchNormBackwardIo& io, float epsilon,
                                        bool global_stats, int64_t ch) {
  const double mean = io.mean[ch];
  const double inv_std = global_stats ? 1.0 / std::sqrt(static_cast<double>(io.stat[ch]) + epsilon) : io.stat[ch];
  double sum_dy = 0, sum_dy_xhat = 0;
  v.each(ch, [&](int64_t i) {
    sum_dy += io.dy[i];
    sum_dy_xhat += io.dy[i] * (io.x[i] - mean) * inv_std;
  });
  const double scale = io.scale[ch];
  io.dbias[ch] = static_cast<float>(sum_dy);
  io.dscale[ch] = static_cast<float>(sum_dy_xhat);
  if (global_stats) {
    v.each(ch, [&](int64_t i) { io.dx[i] = static_cast<float>(io.dy[i] * scale * inv_std); });
    io.dmean[ch] = static_cast<float>(-scale * inv_std * sum_dy);
    io.dvar[ch] = static_cast<float>(-0.5 * scale * inv_std * inv_std * sum_dy_xhat);
    return;
  }
  const double cnt = static_cast<double>(v.count());
  const double mean_dy = cnt > 0 ? sum_dy / cnt : 0.0, mean_dy_xhat = cnt > 0 ? sum_dy_xhat / cnt : 0.0;
  v.each(ch, [&](int64_t i) {
    const double xhat = (io.x[i] - mean) * inv_std;
    io.dx[i] = static_cast<float>(scale * inv_std * (io.dy[i] - mean_dy - xhat * mean_dy_xhat));
  });
}

/// Mean and 1 / sqrt(var + epsilon) of one layer-norm row of `d` elements.
inline void row_moments(const float* x, int64_t d, float epsilon, double& mean, double& inv_std) {
  double sum = 0, sq = 0;
  for (int64_t j = 0; j < d; ++j) sum += x[j];
  mean = d > 0 ? sum / static_cast<double>(d) : 0.0;
  for (int64_t j = 0; j < d; ++j) sq += (x[j] - mean) * (x[j] - mean);
  inv_std = 1.0 / std::sqrt((d > 0 ? sq / static_cast<double>(d) : 0.0) + epsilon);
}

/// dx of one layer-norm row: inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale (scale_at(j): the
/// scale of element j, or 1 without a scale).
template <class ScaleAt>
void layer_norm_backward_row(const float* dy, const float* x, float* dx, int64_t d, double mean, double inv_std,
                             ScaleAt&& scale_at) {
  double sum_g = 0, sum_g_xhat = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double g = dy[j] * scale_at(j);
    sum_g += g;
    sum_g_xhat += g * (x[j] - mean) * inv_std;
  }
  const double mg = d > 0 ? sum_g / static_cast<double>(d) : 0.0;
  const double mgx = d > 0 ? sum_g_xhat / static_cast<double>(d) : 0.0;
  for (int64_t j = 0; j < d; ++j) {
    const double xhat = (x[j] - mean) * inv_std;
    dx[j] = static_cast<float>(inv_std * (dy[j] * scale_at(j) - mg - xhat * mgx));
  }
}

}  // namespace kiln::ref
