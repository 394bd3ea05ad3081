#pragma once
// GridSample, shared by the reference, CPU and CUDA kernels (KILN_HD): one output point of one channel plane,
// following the ONNX reference implementation's coordinate and padding rules, in double.
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/rounding.h"
#include "ops/grid_sample/grid_sample.h"

namespace kiln::grid_sample {

/// What sampling depends on besides the plane: GridSampleAttrs' fields, plain for device code.
struct SampleMode {
  GridSampleMode mode = GridSampleMode::kBilinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};

inline SampleMode sample_mode(const GridSampleAttrs& a) { return {a.mode, a.padding_mode, a.align_corners}; }

KILN_HD inline int64_t clamp_index(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/// Reflects x into [lo, hi] (repeatedly, like a mirror at each end).
KILN_HD inline double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - mul_rn(static_cast<double>(n), range);
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - mul_rn(static_cast<double>(n), range);
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

/// A channel plane [h, w] of T, read as double through `load`, with the padding rule outside it.
template <class T, class Load>
struct Plane {
  const T* data;
  int64_t h, w;
  GridSamplePadding padding;
  double lo_y, hi_y, lo_x, hi_x;  ///< the border used by reflection
  Load load;

  /// The pixel at integer (y, x), with the padding rule outside the plane.
  KILN_NO_EXEC_CHECK
  KILN_HD double at(int64_t y, int64_t x) const {
    switch (padding) {
      case GridSamplePadding::kZeros:
        if (y < 0 || y >= h || x < 0 || x >= w) return 0.0;
        break;
      case GridSamplePadding::kBorder:
        y = clamp_index(y, 0, h - 1);
        x = clamp_index(x, 0, w - 1);
        break;
      case GridSamplePadding::kReflection:
        y = static_cast<int64_t>(reflect(static_cast<double>(y), lo_y, hi_y));
        x = static_cast<int64_t>(reflect(static_cast<double>(x), lo_x, hi_x));
        y = clamp_index(y, 0, h - 1);
        x = clamp_index(x, 0, w - 1);
        break;
    }
    return load(data[y * w + x]);
  }
};

template <class T, class Load>
KILN_HD Plane<T, Load> make_plane(const SampleMode& m, const T* data, int64_t h, int64_t w, Load load) {
  const double shift = m.align_corners ? 0.0 : 0.5;
  return {data, h, w, m.padding, -shift, h - 1 + shift, -shift, w - 1 + shift, load};
}

struct FloatLoad {
  KILN_HD double operator()(float v) const { return v; }
};

/// The float32 plane of the reference and CPU kernels.
inline Plane<float, FloatLoad> make_plane(const GridSampleAttrs& a, const float* data, int64_t h, int64_t w) {
  return make_plane(sample_mode(a), data, h, w, FloatLoad{});
}

/// Cubic convolution weights (a = -0.75) for the four taps around a point at fraction t.
KILN_HD inline void cubic_weights(double t, double* c) {
  constexpr double A = -0.75;
  auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
  auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(1 - t);
  c[3] = far(2 - t);
}

/// The sample at normalized grid point (gx, gy).
KILN_NO_EXEC_CHECK
template <class T, class Load>
KILN_HD float sample(const SampleMode& a, const Plane<T, Load>& p, double gx, double gy) {
  auto denorm = [&](double g, int64_t len) {
    return a.align_corners ? mul_rn((g + 1) / 2, static_cast<double>(len - 1))
                           : (mul_rn(g + 1, static_cast<double>(len)) - 1) / 2;
  };
  double x = denorm(gx, p.w), y = denorm(gy, p.h);
  if (a.mode == GridSampleMode::kNearest) {
    x = std::nearbyint(x);
    y = std::nearbyint(y);
  }
  // Coordinates outside the border move inside first for border and reflection padding.
  if (x < p.lo_x || x > p.hi_x) {
    if (a.padding == GridSamplePadding::kBorder) x = x < 0.0 ? 0.0 : (x > p.w - 1.0 ? p.w - 1.0 : x);
    if (a.padding == GridSamplePadding::kReflection) x = reflect(x, p.lo_x, p.hi_x);
  }
  if (y < p.lo_y || y > p.hi_y) {
    if (a.padding == GridSamplePadding::kBorder) y = y < 0.0 ? 0.0 : (y > p.h - 1.0 ? p.h - 1.0 : y);
    if (a.padding == GridSamplePadding::kReflection) y = reflect(y, p.lo_y, p.hi_y);
  }
  switch (a.mode) {
    case GridSampleMode::kNearest: return static_cast<float>(p.at(static_cast<int64_t>(y), static_cast<int64_t>(x)));
    case GridSampleMode::kBilinear: {
      const double x0 = std::floor(x), y0 = std::floor(y), fx = x - x0, fy = y - y0;
      const int64_t ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
      const double top = (1 - fx) * p.at(iy, ix) + fx * p.at(iy, ix + 1);
      const double bottom = (1 - fx) * p.at(iy + 1, ix) + fx * p.at(iy + 1, ix + 1);
      return static_cast<float>((1 - fy) * top + fy * bottom);
    }
    case GridSampleMode::kBicubic: {
      const double x0 = std::floor(x), y0 = std::floor(y);
      const int64_t ix = static_cast<int64_t>(x0) - 1, iy = static_cast<int64_t>(y0) - 1;
      double cx[4], cy[4];
      cubic_weights(x - x0, cx);
      cubic_weights(y - y0, cy);
      double acc = 0.0;
      for (int i = 0; i < 4; ++i) {
        double row = 0.0;
        for (int j = 0; j < 4; ++j) row += cx[j] * p.at(iy + i, ix + j);
        acc += cy[i] * row;
      }
      return static_cast<float>(acc);
    }
  }
  return 0.f;
}

/// The reference and CPU kernels' form.
inline float sample(const GridSampleAttrs& a, const Plane<float, FloatLoad>& p, double gx, double gy) {
  return sample(sample_mode(a), p, gx, gy);
}

}  // namespace kiln::grid_sample
