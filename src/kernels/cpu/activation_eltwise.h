#pragma once
// What the CPU Activation and ActivationBackward kernels share: the oneDNN eltwise algorithm of an activation (so
// forward and backward agree) and their two registrations, oneDNN first and kiln's own loop for the rest.
#include <optional>

#include "kernels/cpu/onednn.h"
#include "kernels/registry.h"
#include "ops/activation/activation.h"

namespace kiln::cpu {

enum class EltwiseDirection { kForward, kBackward };

/// oneDNN's eltwise algorithm for activation `a` and its alpha and beta; nullopt where the loop runs it (softplus,
/// clip and mish run oneDNN forward only).
inline std::optional<dnnl::algorithm> eltwise_algorithm(const ActivationAttrs& a, EltwiseDirection dir, float& alpha,
                                                        float& beta) {
  using alg = dnnl::algorithm;
  alpha = 0.f;
  beta = 0.f;
  const bool forward = dir == EltwiseDirection::kForward;
  switch (a.kind) {
    case ActivationKind::kRelu: return alg::eltwise_relu;
    case ActivationKind::kLeakyRelu: alpha = a.alpha; return alg::eltwise_relu;
    case ActivationKind::kElu: alpha = a.alpha; return alg::eltwise_elu;
    case ActivationKind::kSigmoid: return alg::eltwise_logistic;
    case ActivationKind::kTanh: return alg::eltwise_tanh;
    case ActivationKind::kGelu: return a.beta != 0.f ? alg::eltwise_gelu_tanh : alg::eltwise_gelu_erf;
    case ActivationKind::kSilu: alpha = a.alpha; return alg::eltwise_swish;
    case ActivationKind::kHardSwish: return alg::eltwise_hardswish;
    case ActivationKind::kSoftplus: return forward ? std::optional(alg::eltwise_soft_relu) : std::nullopt;
    case ActivationKind::kClip:
      if (!forward) return std::nullopt;
      alpha = a.alpha;
      beta = a.beta;
      return alg::eltwise_clip;
    case ActivationKind::kMish: return forward ? std::optional(alg::eltwise_mish) : std::nullopt;
    default: return std::nullopt;
  }
}

/// The oneDNN implementation `name` of `op` (FP32, kinds with an eltwise algorithm; priority 10), and the loop
/// implementation (FP32, every kind; priority 5).
inline KernelImpl onednn_activation_impl(const char* name, const char* op, EltwiseDirection dir, CreateFn create) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 10,
      .supports = [dir](const OpCall& call) -> Status {
        KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
        const auto& a = call.attrs_as<ActivationAttrs>();
        float alpha, beta;
        if (!eltwise_algorithm(a, dir, alpha, beta))
          return unsupported("oneDNN has no eltwise for ", enum_name(a.kind));
        return Status::ok();
      },
      .create = std::move(create),
  };
}
inline KernelImpl loop_activation_impl(const char* name, const char* op, RunFn run) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 5,
      .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
      .create = stateless(std::move(run)),
  };
}

}  // namespace kiln::cpu
