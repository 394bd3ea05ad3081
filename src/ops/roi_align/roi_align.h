#pragma once
// RoiAlign (ONNX RoiAlign): pools each region of interest of x [N, C, H, W] into an
// [output_height, output_width] grid by averaging (or taking the max of) bilinear samples.
// Inputs x, rois [R, 4] as (x1, y1, x2, y2) in input coordinates / spatial_scale, and
// batch_indices [R]; output [R, C, output_height, output_width].
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

/// One region in input coordinates and its samples per bin side (0 when the region is not finite).
struct RoiGrid {
  double x_start = 0, y_start = 0, roi_w = 0, roi_h = 0;
  int64_t h = 0, w = 0;
};
RoiGrid roi_align_grid(const RoiAlignAttrs& a, const double roi[4]);

}  // namespace kiln
