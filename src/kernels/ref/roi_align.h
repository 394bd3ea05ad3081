#pragma once
// RoiAlign, shared by the reference and CPU kernels: one region of one channel plane (float32).
#include <algorithm>
#include <cmath>

#include "kiln/tensor.h"
#include "ops/roi_align/roi_align.h"

namespace kiln::roi_align {

/// Bilinear sample of `plane` [h, w] at (y, x) with ONNX RoiAlign's edge rules; with `max_mode`
/// the largest weighted corner instead of their sum.
inline float sample(const float* plane, int64_t h, int64_t w, double y, double x, bool max_mode) {
  if (h <= 0 || w <= 0 || !std::isfinite(y) || !std::isfinite(x)) return 0.f;  // an empty plane samples 0
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0.f;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = y - y0, lx = x - x0, hy = 1 - ly, hx = 1 - lx;
  const double v00 = hy * hx * plane[y0 * w + x0], v01 = hy * lx * plane[y0 * w + x1];
  const double v10 = ly * hx * plane[y1 * w + x0], v11 = ly * lx * plane[y1 * w + x1];
  if (max_mode) return static_cast<float>(std::max(std::max(v00, v01), std::max(v10, v11)));
  return static_cast<float>(v00 + v01 + v10 + v11);
}

/// Pools one region (x1, y1, x2, y2) of `plane` [h, w] into out [output_height, output_width].
inline void pool_plane(const RoiAlignAttrs& a, const float* plane, int64_t h, int64_t w, const float* roi, float* out) {
  const double region[4] = {roi[0], roi[1], roi[2], roi[3]};
  const RoiGrid g = roi_align_grid(a, region);
  const double x_start = g.x_start, y_start = g.y_start;
  const int64_t oh = a.output_height, ow = a.output_width;
  const double bin_h = g.roi_h / oh, bin_w = g.roi_w / ow;
  // An empty grid (a zero-width or zero-height region) samples nothing: every bin is 0.
  const int64_t grid_h = g.w > 0 ? g.h : 0, grid_w = g.h > 0 ? g.w : 0;
  const bool max_mode = a.mode == RoiAlignMode::kMax;
  const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
  for (int64_t ph = 0; ph < oh; ++ph)
    for (int64_t pw = 0; pw < ow; ++pw) {
      double acc = 0.0;
      bool first = true;
      for (int64_t iy = 0; iy < grid_h; ++iy) {
        const double y = y_start + ph * bin_h + (iy + 0.5) * bin_h / grid_h;
        for (int64_t ix = 0; ix < grid_w; ++ix) {
          const double x = x_start + pw * bin_w + (ix + 0.5) * bin_w / grid_w;
          const double v = sample(plane, h, w, y, x, max_mode);
          if (max_mode)
            acc = first ? v : std::max(acc, v);
          else
            acc += v;
          first = false;
        }
      }
      out[ph * ow + pw] = static_cast<float>(max_mode ? acc : acc / count);
    }
}

/// Batch index of region r, checked against the batch size.
inline Result<int64_t> batch_index(const Tensor& indices, int64_t r, int64_t batch) {
  const int64_t b =
      indices.dtype() == DataType::kInt64 ? indices.data<int64_t>()[r] : static_cast<int64_t>(indices.at(r));
  if (b < 0 || b >= batch)
    return invalid_argument("RoiAlign: batch_indices[", r, "] is ", b, "; it must be in [0, ", batch - 1, "]");
  return b;
}

}  // namespace kiln::roi_align
