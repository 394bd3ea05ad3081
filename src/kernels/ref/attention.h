#pragma once
// Where one batch entry of an Attention problem lies in q, k, v and the mask (batch dims broadcast), shared by
// the reference and CPU kernels.
#include "kernels/common/indexing.h"
#include "kernels/registry.h"
#include "ops/attention/attention.h"

namespace kiln::ref {

class AttentionLayout {
 public:
  /// `mask` is nullptr when absent. The dims are the kernel's run-time (static) dims.
  AttentionLayout(const AttentionShape& shape, const Dims& q, const Dims& k, const Dims& v, const Dims* mask)
      : shape_(shape),
        q_(batch_of(q, shape.batch), shape.batch),
        k_(batch_of(k, shape.batch), shape.batch),
        v_(batch_of(v, shape.batch), shape.batch),
        mask_(mask ? *mask : Dims{}, shape.scores()),
        mask_col_step_(mask && mask->rank() > 0 && (*mask)[mask->rank() - 1] != 1 ? 1 : 0) {}

  int64_t batch_count() const { return shape_.batch.numel(); }
  const float* q(const float* base, int64_t b) const { return base + q_(b) * shape_.s * shape_.d; }
  const float* k(const float* base, int64_t b) const { return base + k_(b) * shape_.sk * shape_.d; }
  const float* v(const float* base, int64_t b) const { return base + v_(b) * shape_.sk * shape_.dv; }
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
  BroadcastIndexer q_, k_, v_, mask_;
  int64_t mask_col_step_;
};

/// The problem of a kernel call, from its tensors.
inline Result<AttentionShape> attention_shape_of(const KernelContext& ctx) {
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask = masked ? ctx.src[3].dims() : Dims{};
  return attention_shape(ctx.src[0].dims(), ctx.src[1].dims(), ctx.src[2].dims(), masked ? &mask : nullptr);
}

}  // namespace kiln::ref
