#pragma once
// RoiAlign (ONNX RoiAlign): pools each region of interest of x [N, C, H, W] into an
// [output_height, output_width] grid by averaging (or taking the max of) bilinear samples.
// Inputs x, rois [R, 4] as (x1, y1, x2, y2) in input coordinates / spatial_scale, and
// batch_indices [R]; output [R, C, output_height, output_width].
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/rounding.h"
#include "ops/attrs.h"

namespace kiln {

enum class RoiAlignMode { kAvg, kMax };
/// half_pixel shifts the region by -0.5 pixel (ONNX opset 16 default); output_half_pixel does
/// not, and makes regions at least 1x1 (the opset 10 behaviour).
enum class RoiAlignCoordinateMode { kHalfPixel, kOutputHalfPixel };
const char* enum_name(RoiAlignMode m);
const char* enum_name(RoiAlignCoordinateMode m);

struct RoiAlignAttrs : AttrsOf<RoiAlignAttrs> {
  RoiAlignMode mode = RoiAlignMode::kAvg;
  RoiAlignCoordinateMode coordinate_transformation_mode = RoiAlignCoordinateMode::kHalfPixel;
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;  ///< samples per bin side; 0: ceil(region size / output size)
  float spatial_scale = 1.0f;
  template <class V>
  void visit(V& v) {
    v("mode", mode);
    v("coordinate_transformation_mode", coordinate_transformation_mode);
    v("output_height", output_height);
    v("output_width", output_width);
    v("sampling_ratio", sampling_ratio);
    v("spatial_scale", spatial_scale);
  }
};

/// What a region's sampling grid depends on: RoiAlignAttrs' numbers, plain for device code.
struct RoiGridParams {
  bool half_pixel = true;
  double scale = 1.0;
  int64_t sampling_ratio = 0, output_height = 1, output_width = 1;
};

inline RoiGridParams roi_grid_params(const RoiAlignAttrs& a) {
  return {a.coordinate_transformation_mode == RoiAlignCoordinateMode::kHalfPixel, a.spatial_scale, a.sampling_ratio,
          a.output_height, a.output_width};
}

/// One region in input coordinates and its samples per bin side (0 when the region is not finite).
struct RoiGrid {
  double x_start = 0, y_start = 0, roi_w = 0, roi_h = 0;
  int64_t h = 0, w = 0;
};

/// The grid of region roi (x1, y1, x2, y2): on the host and in CUDA kernels (products rounded alike).
KILN_HD inline RoiGrid roi_grid(const RoiGridParams& p, const double roi[4]) {
  const double offset = p.half_pixel ? 0.5 : 0.0;
  RoiGrid g;
  g.x_start = mul_rn(roi[0], p.scale) - offset;
  g.y_start = mul_rn(roi[1], p.scale) - offset;
  g.roi_w = mul_rn(roi[2], p.scale) - offset - g.x_start;
  g.roi_h = mul_rn(roi[3], p.scale) - offset - g.y_start;
  if (!p.half_pixel) {
    g.roi_w = g.roi_w < 1.0 ? 1.0 : g.roi_w;
    g.roi_h = g.roi_h < 1.0 ? 1.0 : g.roi_h;
  }
  if (!std::isfinite(g.x_start) || !std::isfinite(g.y_start) || !std::isfinite(g.roi_w) || !std::isfinite(g.roi_h))
    return g;  // a NaN or infinite region samples nothing
  // Adaptive grids are capped so their product cannot overflow.
  auto side = [&](double extent, int64_t out) -> int64_t {
    if (p.sampling_ratio > 0) return p.sampling_ratio;
    const double n = std::ceil(extent / static_cast<double>(out));
    if (!std::isfinite(n) || n <= 0) return 0;
    constexpr double kMaxSide = double(int64_t{1} << 30);
    return static_cast<int64_t>(n < kMaxSide ? n : kMaxSide);
  };
  g.h = side(g.roi_h, p.output_height);
  g.w = side(g.roi_w, p.output_width);
  return g;
}

inline RoiGrid roi_align_grid(const RoiAlignAttrs& a, const double roi[4]) { return roi_grid(roi_grid_params(a), roi); }

}  // namespace kiln
