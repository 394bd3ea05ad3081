#pragma once
// Attention: softmax(scale * q @ k^T + mask) @ v in one op, made by the optimizer from the MatMul, scale, mask add,
// Softmax and MatMul an exported transformer has (the scores never exist as a whole tensor).
#include "kiln/dims.h"
#include "ops/attrs.h"

namespace kiln {

/// Inputs: q [..., S, D], k [..., Sk, D] (not transposed), v [..., Sk, Dv], optional mask broadcastable to
/// [..., S, Sk] (added to the scaled scores). Batch dims (all but the last two) broadcast. Output [..., S, Dv].
/// The softmax runs over Sk, max-subtracted.
struct AttentionAttrs : AttrsOf<AttentionAttrs> {
  float scale = 1.f;

  template <class V>
  void visit(V& v) {
    v("scale", scale);
  }
};

/// The attention problem's sizes: the broadcast batch dims and S, Sk, D, Dv.
struct AttentionShape {
  Dims batch;  ///< the output's batch dims
  int64_t s = 0, sk = 0, d = 0, dv = 0;
  Dims scores() const;  ///< batch + [S, Sk]
  Dims out() const;     ///< batch + [S, Dv]
};

/// Checks q, k, v (and the mask when given: `mask` non-null) fit together; errors name the input and its shape.
Result<AttentionShape> attention_shape(const Dims& q, const Dims& k, const Dims& v, const Dims* mask);

}  // namespace kiln
