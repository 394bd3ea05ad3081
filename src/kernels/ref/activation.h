#pragma once
// The scalar definition of every activation, shared by the reference, CPU and CUDA kernels.
#include <math.h>

#include <cstdint>

#include "kernels/common/host_device.h"
#include "ops/activation/activation.h"

namespace kiln::ref {

KILN_HD inline float activation(ActivationKind kind, float alpha, float beta, float x, float slope = 0.f) {
  switch (kind) {
    case ActivationKind::kRelu: return x > 0.f ? x : 0.f;
    case ActivationKind::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case ActivationKind::kPRelu: return x >= 0.f ? x : slope * x;
    case ActivationKind::kElu: return x >= 0.f ? x : alpha * expm1f(x);
    case ActivationKind::kSelu: return beta * (x > 0.f ? x : alpha * expm1f(x));
    case ActivationKind::kSigmoid: return 1.f / (1.f + expf(-x));
    case ActivationKind::kHardSigmoid: return fminf(fmaxf(alpha * x + beta, 0.f), 1.f);
    case ActivationKind::kTanh: return tanhf(x);
    case ActivationKind::kSoftplus: return x > 20.f ? x : log1pf(expf(x));
    case ActivationKind::kSoftsign: return x / (1.f + fabsf(x));
    case ActivationKind::kClip: return fminf(fmaxf(x, alpha), beta);
    case ActivationKind::kGelu:
      if (beta != 0.f) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    case ActivationKind::kSilu: return x / (1.f + expf(-alpha * x));
    case ActivationKind::kHardSwish: return x * fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f);
    case ActivationKind::kMish: return x * tanhf(x > 20.f ? x : log1pf(expf(x)));
    case ActivationKind::kThresholdedRelu: return x > alpha ? x : 0.f;
    case ActivationKind::kScaledTanh: return alpha * tanhf(beta * x);
    case ActivationKind::kCelu: return fmaxf(0.f, x) + fminf(0.f, alpha * expm1f(x / alpha));
  }
  return x;
}

inline float activation(const ActivationAttrs& a, float x, float slope = 0.f) {
  return activation(a.kind, a.alpha, a.beta, x, slope);
}

/// Applies a fused activation (when on) to `n` floats in place.
inline void apply_fused(const FusedActivation& f, float* data, int64_t n) {
  if (!f.on) return;
  for (int64_t i = 0; i < n; ++i) data[i] = activation(f.kind, f.alpha, f.beta, data[i]);
}

}  // namespace kiln::ref
