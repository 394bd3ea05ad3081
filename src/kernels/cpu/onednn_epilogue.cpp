#include "kernels/cpu/onednn_epilogue.h"

namespace kiln::onednn {

std::optional<std::vector<EltwiseStep>> eltwise_steps(const FusedActivation& f) {
  using A = dnnl::algorithm;
  switch (f.kind) {
    case ActivationKind::kRelu: return std::vector<EltwiseStep>{{A::eltwise_relu}};
    case ActivationKind::kLeakyRelu: return std::vector<EltwiseStep>{{A::eltwise_relu, f.alpha}};
    case ActivationKind::kElu: return std::vector<EltwiseStep>{{A::eltwise_elu, f.alpha}};
    case ActivationKind::kSelu: return std::vector<EltwiseStep>{{A::eltwise_elu, f.alpha}, {A::eltwise_linear, f.beta}};
    case ActivationKind::kSigmoid: return std::vector<EltwiseStep>{{A::eltwise_logistic}};
    case ActivationKind::kHardSigmoid:
      return std::vector<EltwiseStep>{{A::eltwise_linear, f.alpha, f.beta}, {A::eltwise_clip_v2, 0.f, 1.f}};
    case ActivationKind::kTanh: return std::vector<EltwiseStep>{{A::eltwise_tanh}};
    case ActivationKind::kSoftplus: return std::vector<EltwiseStep>{{A::eltwise_soft_relu}};
    case ActivationKind::kClip: return std::vector<EltwiseStep>{{A::eltwise_clip_v2, f.alpha, f.beta}};
    case ActivationKind::kGelu:
      return std::vector<EltwiseStep>{{f.beta != 0.f ? A::eltwise_gelu_tanh : A::eltwise_gelu_erf}};
    case ActivationKind::kSilu: return std::vector<EltwiseStep>{{A::eltwise_swish, f.alpha}};
    case ActivationKind::kHardSwish: return std::vector<EltwiseStep>{{A::eltwise_hardswish}};
    case ActivationKind::kMish: return std::vector<EltwiseStep>{{A::eltwise_mish}};
    case ActivationKind::kScaledTanh:
      // (A linear post-op after the tanh gave wrong results with oneDNN 2.6 here; the tanh's own scale does it.)
      return std::vector<EltwiseStep>{{A::eltwise_linear, f.beta}, {A::eltwise_tanh, 0.f, 0.f, f.alpha}};
    case ActivationKind::kPRelu:
    case ActivationKind::kSoftsign:
    case ActivationKind::kThresholdedRelu:
    case ActivationKind::kCelu: return std::nullopt;
  }
  return std::nullopt;
}

Status supports_fused_activation(const FusedActivation& fused) {
  if (!fused.on || eltwise_steps(fused)) return Status::ok();
  return unsupported("oneDNN has no eltwise post-op for a fused ", enum_name(fused.kind));
}

void append_residual(dnnl::post_ops& ops, const dnnl::memory::desc& residual) {
  ops.append_binary(dnnl::algorithm::binary_add, residual);
}

void append_fused_activation(dnnl::post_ops& ops, const FusedActivation& fused) {
  if (!fused.on) return;
  for (const EltwiseStep& e : eltwise_steps(fused).value_or(std::vector<EltwiseStep>{}))
    ops.append_eltwise(e.scale, e.alg, e.alpha, e.beta);
}

}  // namespace kiln::onednn
