#include "kernels/cpu/onednn_epilogue.h"

namespace kiln::onednn {

std::optional<EltwisePostOp> eltwise_post_op(const FusedActivation& f) {
  using alg = dnnl::algorithm;
  switch (f.kind) {
    case ActivationKind::kRelu: return EltwisePostOp{alg::eltwise_relu};
    case ActivationKind::kLeakyRelu: return EltwisePostOp{alg::eltwise_relu, f.alpha};
    case ActivationKind::kElu: return EltwisePostOp{alg::eltwise_elu, f.alpha};
    case ActivationKind::kSelu: return EltwisePostOp{alg::eltwise_elu, f.alpha, 0.f, f.beta};
    case ActivationKind::kSigmoid: return EltwisePostOp{alg::eltwise_logistic};
    case ActivationKind::kTanh: return EltwisePostOp{alg::eltwise_tanh};
    case ActivationKind::kSoftplus: return EltwisePostOp{alg::eltwise_soft_relu};
    case ActivationKind::kClip: return EltwisePostOp{alg::eltwise_clip, f.alpha, f.beta};
    case ActivationKind::kGelu: return EltwisePostOp{f.beta != 0.f ? alg::eltwise_gelu_tanh : alg::eltwise_gelu_erf};
    case ActivationKind::kSilu: return EltwisePostOp{alg::eltwise_swish, f.alpha};
    case ActivationKind::kHardSwish: return EltwisePostOp{alg::eltwise_hardswish};
    case ActivationKind::kMish: return EltwisePostOp{alg::eltwise_mish};
    default: return std::nullopt;
  }
}

Status supports_fused_activation(const FusedActivation& fused) {
  if (!fused.on || eltwise_post_op(fused)) return Status::ok();
  return unsupported("oneDNN has no eltwise post-op for a fused ", enum_name(fused.kind));
}

void append_residual(dnnl::post_ops& ops, const dnnl::memory::desc& residual) {
  ops.append_binary(dnnl::algorithm::binary_add, residual);
}

void append_fused_activation(dnnl::post_ops& ops, const FusedActivation& fused) {
  if (!fused.on) return;
  if (auto e = eltwise_post_op(fused)) ops.append_eltwise(e->scale, e->algorithm, e->alpha, e->beta);
}

}  // namespace kiln::onednn
