#pragma once
// oneDNN post-ops for the optimizer's epilogues on CPU layers: a fused activation as an eltwise post-op and a
// residual as a binary add.
#include <optional>

#include "kernels/cpu/onednn.h"
#include "ops/activation/activation.h"

namespace kiln::onednn {

/// The eltwise post-op computing `fused` (with its alpha, beta and result scale), or nullopt when oneDNN has none.
struct EltwisePostOp {
  dnnl::algorithm algorithm;
  float alpha = 0.f, beta = 0.f, scale = 1.f;
};
std::optional<EltwisePostOp> eltwise_post_op(const FusedActivation& fused);

/// OK when oneDNN runs `fused` (off, or a kind it has an eltwise for) as a post-op, else the reason.
Status supports_fused_activation(const FusedActivation& fused);

/// Appends a binary add of a tensor described by `residual` (argument index: binary_src_arg(index)) to `ops`.
void append_residual(dnnl::post_ops& ops, const dnnl::memory::desc& residual);
/// Appends the fused activation (when on and supported) to `ops`.
void append_fused_activation(dnnl::post_ops& ops, const FusedActivation& fused);
/// The execute() argument key of the binary post-op at position `index` in the chain.
inline int binary_src_arg(int index) { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1; }

}  // namespace kiln::onednn
