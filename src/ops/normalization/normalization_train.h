#pragma once
// Training forms of the normalization ops: BatchNormalizationTraining (batch statistics, running-statistics
// update) and the backward ops of batch and layer normalization. LayerNormalizationBackward takes
// LayerNormalizationAttrs.
#include "ops/attrs.h"

namespace kiln {

/// y = scale * (x - batch_mean) / sqrt(batch_var + epsilon) + bias per channel (axis 1), batch statistics over
/// every axis but 1 (variance without Bessel's correction), and the running statistics updated as ONNX does:
/// new = momentum * running + (1 - momentum) * batch.
/// Inputs: x (N x C x ...), scale, bias, running_mean, running_var (each [C]).
/// Outputs: y, new_running_mean, new_running_var (the running dtype), saved_mean and saved_inv_std (float32 [C],
/// for BatchNormalizationBackward).
struct BatchNormalizationTrainingAttrs : AttrsOf<BatchNormalizationTrainingAttrs> {
  float epsilon = 1e-5f;
  float momentum = 0.9f;

  template <class V>
  void visit(V& v) {
    v("epsilon", epsilon);
    v("momentum", momentum);
  }
};

/// Inputs: dy, x, scale, mean, stat. Outputs: dx, dscale, dbias ([C], scale's dtype).
/// Training (global_stats false): mean and stat are BatchNormalizationTraining's saved_mean and saved_inv_std, and
/// dx includes the batch statistics' dependence on x. Inference (global_stats true): mean and stat are the running
/// mean and variance (constants of the forward; epsilon is the forward's), and two more outputs give their gradients
/// dmean and dvar.
struct BatchNormalizationBackwardAttrs : AttrsOf<BatchNormalizationBackwardAttrs> {
  float epsilon = 1e-5f;
  bool global_stats = false;

  template <class V>
  void visit(V& v) {
    v("epsilon", epsilon);
    v("global_stats", global_stats);
  }
};

}  // namespace kiln
