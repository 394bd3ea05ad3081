#include "ops/roi_align/roi_align.h"

#include <algorithm>
#include <cmath>

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {

const char* enum_name(RoiAlignMode m) { return m == RoiAlignMode::kAvg ? "avg" : "max"; }
const char* enum_name(RoiAlignCoordinateMode m) {
  return m == RoiAlignCoordinateMode::kHalfPixel ? "half_pixel" : "output_half_pixel";
}

namespace {

OpSchema roi_align_schema() {
  OpSchema s = make_schema<RoiAlignAttrs>("RoiAlign", "roi_align",
                                          "Bilinear region-of-interest pooling to a fixed grid (ONNX RoiAlign)");
  s.input_names = {"x", "rois", "batch_indices"};
  s.min_inputs = s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<RoiAlignAttrs>();
    const Dims& x = ctx.input(0).dims;
    const Dims& rois = ctx.input(1).dims;
    const TensorDesc& idx = ctx.input(2);
    if (!is_floating(ctx.input(0).dtype) || ctx.input(1).dtype != ctx.input(0).dtype)
      return invalid_argument("RoiAlign inputs 'x' and 'rois' must be float of one dtype, got ",
                              dtype_name(ctx.input(0).dtype), " and ", dtype_name(ctx.input(1).dtype));
    if (x.rank() != 4) return invalid_argument("RoiAlign input 'x' must be 4-D [N, C, H, W], got ", x.to_string());
    if (rois.rank() != 2 || (rois[1] != kDynamicDim && rois[1] != 4))
      return invalid_argument("RoiAlign input 'rois' must have shape [num_rois, 4], got ", rois.to_string());
    if (idx.dtype != DataType::kInt64 && idx.dtype != DataType::kInt32)
      return invalid_argument("RoiAlign input 'batch_indices' must be int64, got ", dtype_name(idx.dtype));
    if (idx.dims.rank() != 1 || (idx.dims[0] != kDynamicDim && rois[0] != kDynamicDim && idx.dims[0] != rois[0]))
      return invalid_argument("RoiAlign input 'batch_indices' must have shape [num_rois] = [", rois[0], "], got ",
                              idx.dims.to_string());
    if (a.output_height < 1 || a.output_width < 1)
      return invalid_argument("RoiAlign output_height and output_width must be >= 1, got ", a.output_height, " and ",
                              a.output_width);
    if (a.sampling_ratio < 0) return invalid_argument("RoiAlign sampling_ratio must be >= 0, got ", a.sampling_ratio);
    return one_output(ctx.input(0).dtype, Dims{rois[0], x[1], a.output_height, a.output_width});
  };
  return s;
}

KILN_REGISTER_OP(roi_align_schema());

KILN_REGISTER_FOLD_COST("RoiAlign", [](const Attrs& attrs, const std::vector<const Tensor*>& in,
                                       const std::vector<TensorDesc>& out) {
  const auto& a = static_cast<const RoiAlignAttrs&>(attrs);
  if (!in[0] || !in[1] || in[0]->dims().rank() != 4) return output_elements(out);
  const std::vector<double> rois = tensor_to_doubles(*in[1]);
  const double per_bin = static_cast<double>(in[0]->dims()[1]) * a.output_height * a.output_width;
  double work = output_elements(out);
  // A sample is a bilinear interpolation: four taps, their weights and bounds checks, about 8 element
  // operations (measured: 3e9 unweighted samples took 13 s, where the fold budget expects about 1 s per 1e9).
  constexpr double kSampleCost = 8;
  for (size_t r = 0; r + 3 < rois.size(); r += 4) {
    const RoiGrid g = roi_align_grid(a, &rois[r]);
    work += kSampleCost * per_bin * static_cast<double>(g.h) * static_cast<double>(g.w);
  }
  return work;
});

}  // namespace
}  // namespace kiln
