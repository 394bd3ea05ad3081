#pragma once
// Where one batch entry of an Attention problem lies in q, k, v and the mask (batch dims broadcast), shared by
// the reference and CPU kernels.
#include <algorithm>
#include <utility>

#include "kernels/common/indexing.h"
#include "kernels/registry.h"
#include "ops/attention/attention.h"

namespace kiln::ref {

class AttentionLayout {
 public:
  /// `mask` is nullptr when absent. The dims are the kernel's run-time (static) dims.
  AttentionLayout(const AttentionShape& shape, const Dims& q, const Dims& k, const Dims& v, const Dims* mask)
      : shape_(shape),
        h_(shape.head_count()),
        q_(batch_of(q, shape.operand_batch()), shape.operand_batch()),
        k_(batch_of(k, shape.operand_batch()), shape.operand_batch()),
        v_(batch_of(v, shape.operand_batch()), shape.operand_batch()),
        mask_(mask ? *mask : Dims{}, shape.scores()),
        mask_col_step_(mask && mask->rank() > 0 && (*mask)[mask->rank() - 1] != 1 ? 1 : 0) {}

  int64_t batch_count() const { return shape_.batch.numel(); }
  /// Where batch entry `b`'s matrices start; their rows lie q_row(), k_row(), v_row() and out_row() apart (with
  /// heads, entry b is head b % H of the operands' entry b / H).
  const float* q(const float* base, int64_t b) const { return base + q_offset(b); }
  const float* k(const float* base, int64_t b) const { return base + k_offset(b); }
  const float* v(const float* base, int64_t b) const { return base + v_offset(b); }
  float* out(float* base, int64_t b) const { return base + out_offset(b); }
  int64_t q_offset(int64_t b) const { return q_(b / h_) * shape_.s * q_row() + b % h_ * shape_.d; }
  int64_t k_offset(int64_t b) const { return k_(b / h_) * shape_.sk * k_row() + b % h_ * shape_.d; }
  int64_t v_offset(int64_t b) const { return v_(b / h_) * shape_.sk * v_row() + b % h_ * shape_.dv; }
  int64_t out_offset(int64_t b) const { return b / h_ * shape_.s * out_row() + b % h_ * shape_.dv; }
  int64_t q_row() const { return h_ * shape_.d; }
  int64_t k_row() const { return h_ * shape_.d; }
  int64_t v_row() const { return h_ * shape_.dv; }
  int64_t out_row() const { return h_ * shape_.dv; }
  /// Row `i` of the mask for batch entry `b`: element j is at [j * mask_col_step()].
  const float* mask_row(const float* base, int64_t b, int64_t i) const {
    return base + mask_((b * shape_.s + i) * shape_.sk);
  }
  int64_t mask_col_step() const { return mask_col_step_; }

 private:
  // The batch dims of `d` right-aligned to `batch` (1 where absent), as BroadcastIndexer wants them.
  static Dims batch_of(const Dims& d, const Dims& batch) {
    Dims out = Dims::of_rank(batch.rank(), 1);
    const int n = d.rank() - 2;
    for (int i = 0; i < n; ++i) out[batch.rank() - n + i] = d[i];
    return out;
  }

  AttentionShape shape_;
  int64_t h_;
  BroadcastIndexer q_, k_, v_, mask_;
  int64_t mask_col_step_;
};

/// The head dims D and Dv of a call (the last dims of q and v, divided by the heads when they are interleaved; a
/// dynamic dim stays negative).
inline std::pair<int64_t, int64_t> attention_head_dims(const OpCall& call) {
  const int64_t h = std::max<int64_t>(call.attrs_as<AttentionAttrs>().heads, 1);
  const Dims& q = call.inputs[0].dims;
  const Dims& v = call.inputs[2].dims;
  const int64_t d = q[q.rank() - 1], dv = v[v.rank() - 1];
  return {d < 0 ? d : d / h, dv < 0 ? dv : dv / h};
}

/// The problem of a kernel call, from its tensors.
inline Result<AttentionShape> attention_shape_of(const KernelContext& ctx) {
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask = masked ? ctx.src[3].dims() : Dims{};
  return attention_shape(ctx.src[0].dims(), ctx.src[1].dims(), ctx.src[2].dims(), masked ? &mask : nullptr,
                         ctx.attrs<AttentionAttrs>().heads);
}

}  // namespace kiln::ref
