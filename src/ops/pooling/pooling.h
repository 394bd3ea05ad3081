#pragma once
// Pooling: max, average and Lp pooling over the spatial dims of an N x C x D1 x ... tensor
// (ONNX MaxPool, AveragePool, LpPool and their Global variants).
#include <cstdint>
#include <vector>

#include "kiln/dims.h"
#include "ops/attrs.h"

namespace kiln {

enum class PoolingMode {
  kMax,      // max over the window; padding never wins
  kAverage,  // mean over the window; count_include_pad decides the divisor
  kLp,       // (sum |x|^p)^(1/p); padding adds 0
};

/// ONNX auto_pad. Own name: the convolution family keeps its own enum.
enum class PoolingAutoPad {
  kNotSet,     // explicit pads
  kSameUpper,  // output = ceil(in / stride); odd padding goes to the end
  kSameLower,  // as kSameUpper; odd padding goes to the beginning
  kValid,      // no padding
};

const char* enum_name(PoolingMode mode);
const char* enum_name(PoolingAutoPad pad);

struct PoolingAttrs : AttrsOf<PoolingAttrs> {
  PoolingMode mode = PoolingMode::kMax;
  bool global = false;                ///< window = the whole spatial extent; other geometry must be empty
  std::vector<int64_t> kernel_shape;  ///< one per spatial dim (required unless global)
  std::vector<int64_t> strides;       ///< empty: all 1
  std::vector<int64_t> pads;          ///< [x1_begin, x2_begin, ..., x1_end, x2_end, ...]; empty: all 0
  std::vector<int64_t> dilations;     ///< empty: all 1
  PoolingAutoPad auto_pad = PoolingAutoPad::kNotSet;
  bool ceil_mode = false;          ///< output size rounds up; the last window must start inside input or left pad
  bool count_include_pad = false;  ///< average: the divisor counts padded positions
  int64_t p = 2;                   ///< Lp norm order
  bool return_indices = false;     ///< max: second output, int64 flat indices into the input (ONNX MaxPool)
  bool channels_last = false;      ///< x and y are [N, H, W, C] (2-D only, no indices; set by layout-nhwc)

  template <class V>
  void visit(V& v) {
    v("mode", mode);
    v("global", global);
    v("kernel_shape", kernel_shape);
    v("strides", strides);
    v("pads", pads);
    v("dilations", dilations);
    v("auto_pad", auto_pad);
    v("ceil_mode", ceil_mode);
    v("count_include_pad", count_include_pad);
    v("p", p);
    v("return_indices", return_indices);
    v("channels_last", channels_last);
  }
};

/// Resolved window geometry of one pooling problem; arrays hold one entry per spatial dim.
struct PoolingGeometry {
  static constexpr int kMaxSpatial = kMaxRank - 2;
  int spatial = 0;       ///< number of spatial dims
  int64_t batch = 0;     ///< N
  int64_t channels = 0;  ///< C
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {};
  int64_t kernel[kMaxSpatial] = {}, stride[kMaxSpatial] = {}, dilation[kMaxSpatial] = {};
  int64_t pad_begin[kMaxSpatial] = {}, pad_end[kMaxSpatial] = {};  ///< effective pads (auto_pad resolved)

  /// Extent of a dilated window: (kernel - 1) * dilation + 1.
  int64_t extent(int i) const { return (kernel[i] - 1) * dilation[i] + 1; }
  /// Input padding needed on the right so that the last window fits (>= pad_end under ceil_mode).
  int64_t right_reach(int i) const { return (out[i] - 1) * stride[i] + extent(i) - in[i] - pad_begin[i]; }
};

/// Validates `a` against input dims `x` (N, C, spatial...; N, H, W, C with channels_last) and resolves the
/// geometry. Dynamic spatial dims give kDynamicDim output sizes.
Result<PoolingGeometry> pooling_geometry(const PoolingAttrs& a, const Dims& x);

/// Output spatial size for one dim (ONNX rules), or an error when the window does not fit.
Result<int64_t> pooling_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                                    int64_t pad_end, bool ceil_mode);

}  // namespace kiln
