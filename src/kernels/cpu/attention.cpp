// CPU Attention: parallel over (batch entry, block of query rows). Each task computes its block's scores with
// oneDNN's sgemm into a per-thread buffer, adds the mask, takes the softmax in float32 (max-subtracted) and
// multiplies by the values straight into the output, so the whole score matrix never exists.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <dnnl.hpp>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/ref/attention.h"

namespace kiln {
namespace {

constexpr int64_t kRowBlock = 32;

// Row i of `p` (length n): p = softmax(p + mask) with mask element j at mask[j * step] (mask may be null). The
// exponentials are cpu::exp_approx's, which vectorise (std::exp is a call per element: it took three quarters of
// BERT-base's attention time on 2 cores).
inline void masked_softmax_row(float* p, int64_t n, const float* mask, int64_t step) {
  if (mask)
    for (int64_t j = 0; j < n; ++j) p[j] += mask[j * step];
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max(max, p[j]);
  for (int64_t j = 0; j < n; ++j) p[j] = cpu::exp_approx(p[j] - max);
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) sum += p[j];
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

__attribute__((target("avx2,fma"))) void masked_softmax_row_avx2(float* p, int64_t n, const float* mask, int64_t step) {
  masked_softmax_row(p, n, mask, step);
}

void softmax_rows(float* p, int64_t rows, int64_t n, const ref::AttentionLayout& at, const float* mask, int64_t b,
                  int64_t r0) {
  static const bool kAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  for (int64_t i = 0; i < rows; ++i) {
    const float* m = mask ? at.mask_row(mask, b, r0 + i) : nullptr;
    if (kAvx2)
      masked_softmax_row_avx2(p + i * n, n, m, at.mask_col_step());
    else
      masked_softmax_row(p + i * n, n, m, at.mask_col_step());
  }
}

Status run_attention(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, ref::attention_shape_of(ctx));
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask_dims = masked ? ctx.src[3].dims() : Dims{};
  const ref::AttentionLayout at(s, ctx.src[0].dims(), ctx.src[1].dims(), ctx.src[2].dims(),
                                masked ? &mask_dims : nullptr);
  float* y = ctx.dst[0].data<float>();
  if (ctx.dst[0].numel() == 0) return Status::ok();
  if (s.sk == 0) {  // softmax over nothing, then a product over nothing: zeros
    std::fill(y, y + ctx.dst[0].numel(), 0.f);
    return Status::ok();
  }
  const float scale = ctx.attrs<AttentionAttrs>().scale;
  const float *q = ctx.src[0].data<float>(), *k = ctx.src[1].data<float>(), *v = ctx.src[2].data<float>();
  const float* mask = masked ? ctx.src[3].data<float>() : nullptr;
  const int64_t blocks = (s.s + kRowBlock - 1) / kRowBlock;
  std::atomic<int> failed{0};
  parallel_for(at.batch_count() * blocks, grain_for(kRowBlock * s.sk * (s.d + s.dv)), [&](int64_t task) {
    const int64_t b = task / blocks, r0 = (task % blocks) * kRowBlock, rows = std::min(kRowBlock, s.s - r0);
    thread_local std::vector<float> scores;
    if (scores.size() < static_cast<size_t>(rows * s.sk)) scores.resize(static_cast<size_t>(rows * s.sk));
    float* p = scores.data();
    if (s.d == 0) {
      std::fill(p, p + rows * s.sk, 0.f);
    } else if (dnnl::sgemm('N', 'T', rows, s.sk, s.d, scale, at.q(q, b) + r0 * at.q_row(), at.q_row(), at.k(k, b),
                           at.k_row(), 0.f, p, s.sk) != dnnl::status::success) {
      failed = 1;
      return;
    }
    softmax_rows(p, rows, s.sk, at, mask, b, r0);
    if (s.dv > 0 && dnnl::sgemm('N', 'N', rows, s.dv, s.sk, 1.f, p, s.sk, at.v(v, b), at.v_row(), 0.f,
                                at.out(y, b) + r0 * at.out_row(), at.out_row()) != dnnl::status::success)
      failed = 1;
  });
  if (failed) return internal_error("oneDNN sgemm failed in Attention");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.attention",
    .op = "Attention",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_attention),
});

}  // namespace
}  // namespace kiln
