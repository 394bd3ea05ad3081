#pragma once
// What every CUDA Attention kernel reads: q, k, v, the optional additive mask and the output, the problem's sizes,
// and how each operand's batch dims broadcast to the output's; made once per run from the kernel context.
#include "kernels/common/indexing.h"
#include "kernels/ref/attention.h"
#include "kernels/registry.h"

namespace kiln::cuda {

// Batch entry b of the scores is head b % heads of the operands' entry b / heads (heads 1 in the plain layout); its
// rows lie *_row elements apart.
template <class T>
struct AttentionOperands {
  const T *q, *k, *v, *mask;  // mask may be null
  T* out;
  int64_t batch, s, sk;
  int d, dv;
  int64_t heads;
  float scale;
  int64_t mask_col_step;  // 1, or 0 when the mask broadcasts over the keys
  BroadcastIndexer q_at, k_at, v_at, mask_at;

  __host__ __device__ int64_t q_row() const { return heads * d; }
  __host__ __device__ int64_t k_row() const { return heads * d; }
  __host__ __device__ int64_t v_row() const { return heads * dv; }
  __host__ __device__ int64_t out_row() const { return heads * dv; }
  __device__ const T* q_of(int64_t b) const { return q + q_at(b / heads) * s * q_row() + b % heads * d; }
  __device__ const T* k_of(int64_t b) const { return k + k_at(b / heads) * sk * k_row() + b % heads * d; }
  __device__ const T* v_of(int64_t b) const { return v + v_at(b / heads) * sk * v_row() + b % heads * dv; }
  __device__ T* out_of(int64_t b) const { return out + b / heads * s * out_row() + b % heads * dv; }
};

/// The batch dims of `d` right-aligned to `batch` (1 where absent), as BroadcastIndexer wants them.
inline Dims attention_batch_dims(const Dims& d, const Dims& batch) {
  Dims out = Dims::of_rank(batch.rank(), 1);
  const int n = d.rank() - 2;
  for (int i = 0; i < n; ++i) out[batch.rank() - n + i] = d[i];
  return out;
}

template <class T>
AttentionOperands<T> attention_operands(KernelContext& ctx, const AttentionShape& s) {
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask_dims = masked ? ctx.src[3].dims() : Dims{};
  return {
      .q = ctx.src[0].data<T>(),
      .k = ctx.src[1].data<T>(),
      .v = ctx.src[2].data<T>(),
      .mask = masked ? ctx.src[3].data<T>() : nullptr,
      .out = ctx.dst[0].data<T>(),
      .batch = s.batch.numel(),
      .s = s.s,
      .sk = s.sk,
      .d = static_cast<int>(s.d),
      .dv = static_cast<int>(s.dv),
      .heads = s.head_count(),
      .scale = ctx.attrs<AttentionAttrs>().scale,
      .mask_col_step = masked && mask_dims.rank() > 0 && mask_dims[mask_dims.rank() - 1] != 1 ? 1 : 0,
      .q_at = BroadcastIndexer(attention_batch_dims(ctx.src[0].dims(), s.operand_batch()), s.operand_batch()),
      .k_at = BroadcastIndexer(attention_batch_dims(ctx.src[1].dims(), s.operand_batch()), s.operand_batch()),
      .v_at = BroadcastIndexer(attention_batch_dims(ctx.src[2].dims(), s.operand_batch()), s.operand_batch()),
      .mask_at = BroadcastIndexer(mask_dims, s.scores()),
  };
}

}  // namespace kiln::cuda
