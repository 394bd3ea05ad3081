#pragma once
// Loss ops with PyTorch's definitions (torch.nn.*Loss) and their backward ops: MSELoss, L1Loss, SmoothL1Loss,
// BCEWithLogitsLoss, NLLLoss, CrossEntropyLoss (fused log-softmax + NLL), CTCLoss.
#include <cstdint>

#include "ops/attrs.h"

namespace kiln {

/// none: one loss per element (per sample for the class losses); mean, sum: one number.
enum class LossReduction { kNone, kMean, kSum };
const char* enum_name(LossReduction r);

/// MSELoss (x - t)^2, L1Loss |x - t|, and their backward ops (dy, x, t) -> dx. x and t have one shape.
struct LossAttrs : AttrsOf<LossAttrs> {
  LossReduction reduction = LossReduction::kMean;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
  }
};

/// SmoothL1Loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = x - t; beta 0 is L1Loss).
struct SmoothL1LossAttrs : AttrsOf<SmoothL1LossAttrs> {
  LossReduction reduction = LossReduction::kMean;
  float beta = 1.0f;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("beta", beta);
  }
};

/// Which input the backward op of BCEWithLogitsLoss differentiates (its inputs: x, target, weight, pos_weight).
enum class BceWrt { kInput, kTarget, kWeight, kPosWeight };
const char* enum_name(BceWrt w);

/// BCEWithLogitsLoss(x, t, weight?, pos_weight?) (LossAttrs): w * ((1 - t) x - (1 + (pos_weight - 1) t)
/// log(sigmoid(x))), weight and pos_weight broadcast to x. Its backward op (dy, x, t, weight?, pos_weight?)
/// gives the derivative with respect to input `wrt` per element of x (the gradient rule sums it to weight's or
/// pos_weight's shape).
struct BCEWithLogitsLossBackwardAttrs : AttrsOf<BCEWithLogitsLossBackwardAttrs> {
  LossReduction reduction = LossReduction::kMean;
  BceWrt wrt = BceWrt::kInput;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("wrt", wrt);
  }
};

/// Which input the backward op of NLLLoss or CrossEntropyLoss differentiates: x, the class-probability
/// target (CrossEntropyLoss) or the class weights (the output then has the weight's shape [C]).
enum class ClassLossWrt { kInput, kTarget, kWeight };
const char* enum_name(ClassLossWrt w);

/// NLLLoss(x, target, weight?): x holds log-probabilities [N, C, d1...] (or [C]), target class indices
/// [N, d1...] (or []), weight one per class. loss = -weight[t] x[t]; targets equal to ignore_index count
/// nothing; mean divides by the sum of the counted targets' weights.
struct NLLLossAttrs : AttrsOf<NLLLossAttrs> {
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("ignore_index", ignore_index);
  }
};

/// CrossEntropyLoss(x, target, weight?): NLLLoss of log_softmax(x) over dim 1 (dim 0 for x of rank 1), with
/// label smoothing eps: (1 - eps) nll + eps / C * sum_c -weight[c] logp[c]. target holds class indices (an
/// integer tensor of x's shape without dim 1) or class probabilities (x's shape and dtype; ignore_index unused).
struct CrossEntropyLossAttrs : AttrsOf<CrossEntropyLossAttrs> {
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;
  float label_smoothing = 0.0f;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("ignore_index", ignore_index);
    v("label_smoothing", label_smoothing);
  }
};

/// The backward ops of NLLLoss and CrossEntropyLoss (dy, x, target, weight?): the forward's attributes and
/// the input differentiated.
struct NLLLossBackwardAttrs : AttrsOf<NLLLossBackwardAttrs> {
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;
  ClassLossWrt wrt = ClassLossWrt::kInput;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("ignore_index", ignore_index);
    v("wrt", wrt);
  }
};

struct CrossEntropyLossBackwardAttrs : AttrsOf<CrossEntropyLossBackwardAttrs> {
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;
  float label_smoothing = 0.0f;
  ClassLossWrt wrt = ClassLossWrt::kInput;

  template <class V>
  void visit(V& v) {
    v("reduction", reduction);
    v("ignore_index", ignore_index);
    v("label_smoothing", label_smoothing);
    v("wrt", wrt);
  }
};

inline NLLLossBackwardAttrs backward_attrs(const NLLLossAttrs& a, ClassLossWrt wrt) {
  NLLLossBackwardAttrs b;
  b.reduction = a.reduction;
  b.ignore_index = a.ignore_index;
  b.wrt = wrt;
  return b;
}
inline CrossEntropyLossBackwardAttrs backward_attrs(const CrossEntropyLossAttrs& a, ClassLossWrt wrt) {
  CrossEntropyLossBackwardAttrs b;
  b.reduction = a.reduction;
  b.ignore_index = a.ignore_index;
  b.label_smoothing = a.label_smoothing;
  b.wrt = wrt;
  return b;
}

/// CTCLoss(log_probs [T, N, C], targets [N, S] or concatenated [sum(target_lengths)], input_lengths [N],
/// target_lengths [N]): -log p(target | log_probs) summed over alignments. mean divides each loss by its
/// target length (at least 1), then averages over the batch; zero_infinity turns infinite losses (no
/// alignment fits) and their gradients into 0.
struct CTCLossAttrs : AttrsOf<CTCLossAttrs> {
  int64_t blank = 0;
  LossReduction reduction = LossReduction::kMean;
  bool zero_infinity = false;

  template <class V>
  void visit(V& v) {
    v("blank", blank);
    v("reduction", reduction);
    v("zero_infinity", zero_infinity);
  }
};

}  // namespace kiln
