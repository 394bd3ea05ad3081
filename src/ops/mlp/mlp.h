#pragma once
// MLP: a chain of fully connected layers with biases and activations, fused by the optimizer (TensorRT's
// "2-layer MLP" ... up to 31 layers).
#include "ops/activation/activation.h"
#include "ops/attrs.h"

namespace kiln {

/// Inputs: x, then per layer l its weights [out_l, in_l] and bias [out_l]. Over x's last axis (in_0),
/// h_0 = x, h_{l+1} = act_l(h_l @ weights_l^T + bias_l); y has x's dims with the last one out_{L-1}.
/// Per layer: activation kind (an ActivationKind value, or kNoActivation) with its alpha and beta.
struct MlpAttrs : AttrsOf<MlpAttrs> {
  static constexpr int64_t kNoActivation = -1;
  std::vector<int64_t> activation_kinds;
  std::vector<float> activation_alphas;
  std::vector<float> activation_betas;

  template <class V>
  void visit(V& v) {
    v("activation_kinds", activation_kinds);
    v("activation_alphas", activation_alphas);
    v("activation_betas", activation_betas);
  }

  int layers() const { return static_cast<int>(activation_kinds.size()); }
  /// Layer `l`'s activation (off for kNoActivation).
  FusedActivation activation(int l) const {
    if (activation_kinds[l] == kNoActivation) return {};
    return {true, static_cast<ActivationKind>(activation_kinds[l]), activation_alphas[l], activation_betas[l]};
  }
  /// Appends a layer with activation `a` (off: none).
  void add_layer(const FusedActivation& a) {
    activation_kinds.push_back(a.on ? static_cast<int64_t>(a.kind) : kNoActivation);
    activation_alphas.push_back(a.on ? a.alpha : 0.f);
    activation_betas.push_back(a.on ? a.beta : 0.f);
  }
};

}  // namespace kiln
