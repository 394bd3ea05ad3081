#pragma once
// Per-channel (batch norm) and per-row (layer norm) pieces of the training normalization kernels (float rows,
// double totals), shared by the reference and CPU kernels (which run channels or rows in parallel).
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln::ref {

/// x viewed as [n, c, inner]: the elements of one channel are rows of `inner` at (b * c + ch) * inner.
struct ChannelView {
  int64_t n = 1, c = 1, inner = 1;
  int64_t count() const { return n * inner; }
  /// f(i) for every element of channel `ch`.
  template <class F>
  void each(int64_t ch, F&& f) const {
    for (int64_t b = 0; b < n; ++b) {
      const int64_t base = (b * c + ch) * inner;
#pragma omp simd
      for (int64_t i = base; i < base + inner; ++i) f(i);
    }
  }
  /// The sum of f(i) over channel `ch`: each row in float (vectorized), the rows in double.
  template <class F>
  double sum(int64_t ch, F&& f) const {
    double total = 0;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t base = (b * c + ch) * inner;
      float row = 0.f;
#pragma omp simd reduction(+ : row)
      for (int64_t i = base; i < base + inner; ++i) row += f(i);
      total += row;
    }
    return total;
  }
};

/// Batch mean and variance (no Bessel correction) of channel `ch`.
inline void channel_moments(const ChannelView& v, const float* x, int64_t ch, double& mean, double& var) {
  const double cnt = static_cast<double>(v.count());
  mean = cnt > 0 ? v.sum(ch, [x](int64_t i) { return x[i]; }) / cnt : 0.0;
  const float m = static_cast<float>(mean);
  var = cnt > 0 ? v.sum(ch, [x, m](int64_t i) { return (x[i] - m) * (x[i] - m); }) / cnt : 0.0;
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
  const float s = static_cast<float>(io.scale[ch] * inv_std), t = static_cast<float>(io.bias[ch] - mean * s);
  const float* x = io.x;
  float* y = io.y;
  v.each(ch, [=](int64_t i) { y[i] = x[i] * s + t; });
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
  const float mean = io.mean[ch];
  const double inv_std_d =
      global_stats ? 1.0 / std::sqrt(static_cast<double>(io.stat[ch]) + epsilon) : static_cast<double>(io.stat[ch]);
  const float inv_std = static_cast<float>(inv_std_d);
  const float *dy = io.dy, *x = io.x;
  float* dx = io.dx;
  const double sum_dy = v.sum(ch, [dy](int64_t i) { return dy[i]; });
  const double sum_dy_xhat = v.sum(ch, [=](int64_t i) { return dy[i] * (x[i] - mean) * inv_std; });
  const double scale = io.scale[ch];
  io.dbias[ch] = static_cast<float>(sum_dy);
  io.dscale[ch] = static_cast<float>(sum_dy_xhat);
  if (global_stats) {
    const float k = static_cast<float>(scale * inv_std_d);
    v.each(ch, [=](int64_t i) { dx[i] = dy[i] * k; });
    io.dmean[ch] = static_cast<float>(-scale * inv_std_d * sum_dy);
    io.dvar[ch] = static_cast<float>(-0.5 * scale * inv_std_d * inv_std_d * sum_dy_xhat);
    return;
  }
  const double cnt = static_cast<double>(v.count());
  const float mean_dy = cnt > 0 ? static_cast<float>(sum_dy / cnt) : 0.f;
  const float mean_dy_xhat = cnt > 0 ? static_cast<float>(sum_dy_xhat / cnt) : 0.f;
  const float k = static_cast<float>(scale * inv_std_d);
  v.each(ch, [=](int64_t i) { dx[i] = k * (dy[i] - mean_dy - (x[i] - mean) * inv_std * mean_dy_xhat); });
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

namespace kiln::ref {

/// LRNBackward over one batch item x [c, inner] (`d` scratch of c * inner): with
/// d = bias + alpha / size * (sum of x^2 over the window), y = x * d^-beta and
/// dx = dy * d^-beta - 2 * alpha * beta / size * x * (sum over the windows holding c of dy * x * d^(-beta - 1)).
inline void lrn_backward_item(int64_t size, float alpha, float beta, float bias, const float* x, const float* dy,
                              float* dx, int64_t c, int64_t inner, double* d) {
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const double a = alpha / static_cast<double>(size);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < inner; ++i) {
      double sq = 0;
      for (int64_t k = std::max<int64_t>(ch - before, 0); k <= std::min(ch + after, c - 1); ++k)
        sq += static_cast<double>(x[k * inner + i]) * x[k * inner + i];
      d[ch * inner + i] = bias + a * sq;
    }
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0;
      for (int64_t k = std::max<int64_t>(ch - after, 0); k <= std::min(ch + before, c - 1); ++k) {
        const int64_t at = k * inner + i;
        acc += static_cast<double>(dy[at]) * x[at] * std::pow(d[at], -beta - 1.0);
      }
      const int64_t at = ch * inner + i;
      dx[at] = static_cast<float>(dy[at] * std::pow(d[at], -static_cast<double>(beta)) - 2.0 * a * beta * x[at] * acc);
    }
}

}  // namespace kiln::ref
