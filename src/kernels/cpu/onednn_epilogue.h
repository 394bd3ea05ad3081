#pragma once
// oneDNN post-ops for the optimizer's epilogues on CPU layers: a fused activation as an eltwise post-op and a
// residual as a binary add.
#include <optional>
#include <vector>

#include "kernels/cpu/onednn.h"
#include "ops/activation/activation.h"

namespace kiln::onednn {

/// One oneDNN eltwise post-op: dst = scale * alg(dst; alpha, beta).
struct EltwiseStep {
  dnnl::algorithm alg;
  float alpha = 0.f, beta = 0.f, scale = 1.f;
};
/// The eltwise post-ops computing a fused activation (some kinds take two), or nullopt where oneDNN has none.
std::optional<std::vector<EltwiseStep>> eltwise_steps(const FusedActivation& fused);

/// OK when oneDNN runs `fused` (off, or a kind it has an eltwise for) as a post-op, else the reason.
Status supports_fused_activation(const FusedActivation& fused);

/// Appends a binary add of a tensor described by `residual` (argument index: binary_src_arg(index)) to `ops`.
void append_residual(dnnl::post_ops& ops, const dnnl::memory::desc& residual);
/// Appends the fused activation (when on and supported) to `ops`.
void append_fused_activation(dnnl::post_ops& ops, const FusedActivation& fused);
/// The execute() argument key of the binary post-op at position `index` in the chain.
inline int binary_src_arg(int index) { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1; }

}  // namespace kiln::onednn
