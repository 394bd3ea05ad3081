#pragma once
// Attention: softmax(scale * q @ k^T + mask) @ v in one op, made by the optimizer from the MatMul, scale, mask add,
// Softmax and MatMul an exported transformer has (the scores never exist as a whole tensor).
#include "kiln/dims.h"
#include "ops/attrs.h"

namespace kiln {

/// Inputs: q [..., S, D], k [..., Sk, D] (not transposed), v [..., Sk, Dv], optional mask broadcastable to
/// [..., S, Sk] (added to the scaled scores). Batch dims (all but the last two) broadcast. Output [..., S, Dv].
/// The softmax runs over Sk, max-subtracted.
/// With `heads` H > 0 the heads lie interleaved in the feature dim, as the projections make them: q [..., S, H*D],
/// k [..., Sk, H*D], v [..., Sk, H*Dv], the mask broadcastable to [..., H, S, Sk], output [..., S, H*Dv]; the same
/// as splitting each operand to [..., H, S, D] (reshape and transpose), attention, and merging the output back.
struct AttentionAttrs : AttrsOf<AttentionAttrs> {
  float scale = 1.f;
  int64_t heads = 0;

  template <class V>
  void visit(V& v) {
    v("scale", scale);
    v("heads", heads);
  }
};

/// The attention problem's sizes: the broadcast batch dims (with heads: the heads last) and S, Sk, D, Dv.
struct AttentionShape {
  Dims batch;         ///< the scores' batch dims
  int64_t heads = 0;  ///< 0: plain layout; H: heads interleaved in the features (batch ends with H)
  int64_t s = 0, sk = 0, d = 0, dv = 0;
  int64_t head_count() const { return heads > 0 ? heads : 1; }  ///< heads per row of the operands
  Dims operand_batch() const;                                   ///< the batch dims the operands broadcast to
  Dims scores() const;                                          ///< batch + [S, Sk]
  Dims out() const;  ///< batch + [S, Dv]; with heads: operand_batch() + [S, H * Dv]
};

/// Checks q, k, v (and the mask when given: `mask` non-null) fit together for `heads` (0: plain layout); errors
/// name the input and its shape.
Result<AttentionShape> attention_shape(const Dims& q, const Dims& k, const Dims& v, const Dims* mask,
                                       int64_t heads = 0);

}  // namespace kiln
