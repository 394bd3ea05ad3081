#pragma once
// Scale: y = (x * scale + shift) ^ power with per-tensor, per-channel or per-element coefficients
// (TensorRT's IScaleLayer).
#include "kiln/dims.h"
#include "ops/activation/activation.h"
#include "ops/attrs.h"

namespace kiln {

enum class ScaleMode {
  kUniform,      // each coefficient is one value
  kChannel,      // one value per index of x's channel_axis: shape [C]
  kElementwise,  // one value per element of x's dims from channel_axis on: shape dims[channel_axis:]
};

const char* enum_name(ScaleMode mode);

/// Inputs: x, then shift, scale, power, each optional (defaults 0, 1, 1). Coefficients may have any
/// shape with the element count that `mode` asks for.
/// `fused` (the optimizer's scale + activation fusion) applies an activation to the result.
struct ScaleAttrs : AttrsOf<ScaleAttrs> {
  ScaleMode mode = ScaleMode::kUniform;
  int64_t channel_axis = 1;
  FusedActivation fused;

  template <class V>
  void visit(V& v) {
    v("mode", mode);
    v("channel_axis", channel_axis);
    fused.visit(v);
  }
};

/// How coefficient indices follow the elements of x: coefficient of element i is
/// (i / inner) % count (uniform: count 1).
struct ScaleLayout {
  int64_t inner = 1;
  int64_t count = 1;
  int64_t operator()(int64_t i) const { return (i / inner) % count; }
};

/// The layout for x of `dims`; fails on a bad channel_axis.
Result<ScaleLayout> scale_layout(const ScaleAttrs& attrs, const Dims& dims);

}  // namespace kiln
