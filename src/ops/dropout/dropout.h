#pragma once
// Dropout for training: y = x * mask / (1 - ratio), the mask drawn from a counter-based hash of (seed, step,
// element index), so a run (or a resumed run) given the same seed and step draws the same mask.
#include <cstdint>

#include "ops/attrs.h"

namespace kiln {

/// Inputs: x, and optionally step (an int32/int64 scalar, e.g. the training step: a new mask per step).
/// Outputs: y (x's dtype and shape) and mask (bool, x's shape: true where x is kept).
/// With training false, y = x and the mask is all true. DropoutBackward(dy, mask) takes the same attributes.
struct DropoutAttrs : AttrsOf<DropoutAttrs> {
  float ratio = 0.5f;  ///< the probability of dropping an element, in [0, 1)
  int64_t seed = 0;
  bool training = true;

  template <class V>
  void visit(V& v) {
    v("ratio", ratio);
    v("seed", seed);
    v("training", training);
  }
};

}  // namespace kiln
