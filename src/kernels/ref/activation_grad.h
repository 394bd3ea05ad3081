#pragma once
// The derivative of every activation (kernels/ref/activation.h), shared by the reference, CPU and CUDA kernels of
// ActivationBackward.
#include <math.h>

#include "kernels/common/host_device.h"
#include "ops/activation/activation.h"

namespace kiln::ref {

KILN_HD inline float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

/// f'(x) of activation `kind` (PReLU: d/dx with slope `slope`).
KILN_HD inline float activation_derivative(ActivationKind kind, float alpha, float beta, float x, float slope = 0.f) {
  switch (kind) {
    case ActivationKind::kRelu: return x > 0.f ? 1.f : 0.f;
    case ActivationKind::kLeakyRelu: return x >= 0.f ? 1.f : alpha;
    case ActivationKind::kPRelu: return x >= 0.f ? 1.f : slope;
    case ActivationKind::kElu: return x >= 0.f ? 1.f : alpha * expf(x);
    case ActivationKind::kSelu: return beta * (x > 0.f ? 1.f : alpha * expf(x));
    case ActivationKind::kSigmoid: {
      const float s = sigmoid(x);
      return s * (1.f - s);
    }
    case ActivationKind::kHardSigmoid: {
      const float v = alpha * x + beta;
      return v > 0.f && v < 1.f ? alpha : 0.f;
    }
    case ActivationKind::kTanh: {
      const float t = tanhf(x);
      return 1.f - t * t;
    }
    case ActivationKind::kSoftplus: return x > 20.f ? 1.f : sigmoid(x);
    case ActivationKind::kSoftsign: {
      const float d = 1.f + fabsf(x);
      return 1.f / (d * d);
    }
    case ActivationKind::kClip: return x >= alpha && x <= beta ? 1.f : 0.f;
    case ActivationKind::kGelu:
      if (beta != 0.f) {
        constexpr float k = 0.7978845608028654f, c = 0.044715f;
        const float t = tanhf(k * (x + c * x * x * x));
        return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * c * x * x);
      }
      return 0.5f * (1.f + erff(x * 0.7071067811865476f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
    case ActivationKind::kSilu: {
      const float s = sigmoid(alpha * x);
      return s + alpha * x * s * (1.f - s);
    }
    case ActivationKind::kHardSwish: return x < -3.f ? 0.f : x > 3.f ? 1.f : x / 3.f + 0.5f;
    case ActivationKind::kMish: {
      const float t = tanhf(x > 20.f ? x : log1pf(expf(x)));
      return t + x * (1.f - t * t) * (x > 20.f ? 1.f : sigmoid(x));
    }
    case ActivationKind::kThresholdedRelu: return x > alpha ? 1.f : 0.f;
    case ActivationKind::kScaledTanh: {
      const float t = tanhf(beta * x);
      return alpha * beta * (1.f - t * t);
    }
    case ActivationKind::kCelu: return x > 0.f ? 1.f : expf(x / alpha);
  }
  return 1.f;
}

/// PReLU: d/d(slope) of one element.
KILN_HD inline float prelu_slope_derivative(float x) { return x >= 0.f ? 0.f : x; }

}  // namespace kiln::ref
