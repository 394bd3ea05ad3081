#pragma once
// Activation: y = f(x) elementwise; PReLU takes its slope as a second input.
#include "ops/attrs.h"

namespace kiln {

enum class ActivationKind {
  kRelu,         // max(x, 0)
  kLeakyRelu,    // x >= 0 ? x : alpha * x
  kPRelu,        // x >= 0 ? x : slope * x (slope: input 1, broadcast to x)
  kElu,          // x >= 0 ? x : alpha * (exp(x) - 1)
  kSelu,         // beta * (x >= 0 ? x : alpha * (exp(x) - 1)); alpha, beta default to SELU's constants
  kSigmoid,      // 1 / (1 + exp(-x))
  kHardSigmoid,  // clamp(alpha * x + beta, 0, 1)
  kTanh,
  kSoftplus,         // log(1 + exp(x))
  kSoftsign,         // x / (1 + |x|)
  kClip,             // clamp(x, alpha, beta)
  kGelu,             // x * Phi(x) (erf form); beta = 1 selects the tanh approximation
  kSilu,             // x * sigmoid(alpha * x) (Swish; alpha = 1 for SiLU)
  kHardSwish,        // x * clamp(x / 6 + 0.5, 0, 1)
  kMish,             // x * tanh(softplus(x))
  kThresholdedRelu,  // x > alpha ? x : 0
  kScaledTanh,       // alpha * tanh(beta * x)
  kCelu,             // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
};

const char* enum_name(ActivationKind kind);

struct ActivationAttrs : AttrsOf<ActivationAttrs> {
  ActivationKind kind = ActivationKind::kRelu;
  float alpha = 0.f;
  float beta = 0.f;

  template <class V>
  void visit(V& v) {
    v("kind", kind);
    v("alpha", alpha);
    v("beta", beta);
  }
};

/// Attributes of `kind` with the conventional defaults for alpha and beta (ONNX's).
ActivationAttrs activation_defaults(ActivationKind kind);

/// An activation fused into the layer before it (convolution, matrix multiply, fully connected, scale) by the
/// optimizer: applied to the layer's result, after its bias and residual sum. Off by default. A layer's
/// attributes list it with `fused.visit(v)`, giving the fields "fused_activation", "fused_kind", "fused_alpha",
/// "fused_beta". PReLU (a second input) is never fused.
struct FusedActivation {
  bool on = false;
  ActivationKind kind = ActivationKind::kRelu;
  float alpha = 0.f;
  float beta = 0.f;

  template <class V>
  void visit(V& v) {
    v("fused_activation", on);
    v("fused_kind", kind);
    v("fused_alpha", alpha);
    v("fused_beta", beta);
  }
  static FusedActivation from(const ActivationAttrs& a) { return {true, a.kind, a.alpha, a.beta}; }
};

}  // namespace kiln
