#pragma once
// RoiAlign, shared by the reference, CPU and CUDA kernels: one region of one channel plane.
#include <algorithm>
#include <cmath>

#include "core/host_device.h"
#include "core/rounding.h"
#include "kiln/tensor.h"
#include "ops/roi_align/roi_align.h"

namespace kiln::roi_align {

/// Bilinear sample at (y, x) of a plane [h, w] whose element (y, x) is at(y, x), with ONNX RoiAlign's edge rules;
/// with `max_mode` the largest weighted corner instead of their sum. Shared with the CUDA kernel.
KILN_NO_EXEC_CHECK
template <class At>
KILN_HD float sample(int64_t h, int64_t w, double y, double x, bool max_mode, const At& at) {
  if (h <= 0 || w <= 0 || !std::isfinite(y) || !std::isfinite(x)) return 0.f;  // an empty plane samples 0
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0.f;
  y = y < 0.0 ? 0.0 : y;
  x = x < 0.0 ? 0.0 : x;
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
  const double v00 = mul_rn(hy * hx, at(y0, x0)), v01 = mul_rn(hy * lx, at(y0, x1));
  const double v10 = mul_rn(ly * hx, at(y1, x0)), v11 = mul_rn(ly * lx, at(y1, x1));
  if (max_mode) {
    const double top = v00 < v01 ? v01 : v00, bottom = v10 < v11 ? v11 : v10;
    return static_cast<float>(top < bottom ? bottom : top);
  }
  return static_cast<float>(v00 + v01 + v10 + v11);
}

/// Bin (ph, pw) of a region with grid g pooled into oh x ow bins: the average (or the max) of its samples of a
/// plane [h, w] read through at(y, x). Shared with the CUDA kernel.
KILN_NO_EXEC_CHECK
template <class At>
KILN_HD float pool_bin(const RoiGrid& g, int64_t oh, int64_t ow, int64_t ph, int64_t pw, bool max_mode, int64_t h,
                       int64_t w, const At& at) {
  const double bin_h = g.roi_h / oh, bin_w = g.roi_w / ow;
  // An empty grid (a zero-width or zero-height region) samples nothing: the bin is 0.
  const int64_t grid_h = g.w > 0 ? g.h : 0, grid_w = g.h > 0 ? g.w : 0;
  const double count = static_cast<double>(grid_h * grid_w > 1 ? grid_h * grid_w : 1);
  double acc = 0.0;
  bool first = true;
  for (int64_t iy = 0; iy < grid_h; ++iy) {
    const double y = g.y_start + mul_rn(static_cast<double>(ph), bin_h) + mul_rn(iy + 0.5, bin_h) / grid_h;
    for (int64_t ix = 0; ix < grid_w; ++ix) {
      const double x = g.x_start + mul_rn(static_cast<double>(pw), bin_w) + mul_rn(ix + 0.5, bin_w) / grid_w;
      const double v = sample(h, w, y, x, max_mode, at);
      if (max_mode)
        acc = first || acc < v ? v : acc;
      else
        acc += v;
      first = false;
    }
  }
  return static_cast<float>(max_mode ? acc : acc / count);
}

/// Pools one region (x1, y1, x2, y2) of `plane` [h, w] into out [output_height, output_width].
inline void pool_plane(const RoiAlignAttrs& a, const float* plane, int64_t h, int64_t w, const float* roi, float* out) {
  const double region[4] = {roi[0], roi[1], roi[2], roi[3]};
  const RoiGrid g = roi_align_grid(a, region);
  auto at = [&](int64_t y, int64_t x) { return static_cast<double>(plane[y * w + x]); };
  const bool max_mode = a.mode == RoiAlignMode::kMax;
  for (int64_t ph = 0; ph < a.output_height; ++ph)
    for (int64_t pw = 0; pw < a.output_width; ++pw)
      out[ph * a.output_width + pw] = pool_bin(g, a.output_height, a.output_width, ph, pw, max_mode, h, w, at);
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
