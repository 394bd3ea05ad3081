#pragma once
// PointwiseChain: several float32 pointwise ops (activations, unary math, binary arithmetic) run as one program
// over each element, made by the optimizer from chains of such nodes, so the data passes through memory once.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/attrs.h"

namespace kiln {

enum class PointwiseStepKind { kActivation, kUnary, kBinary };
const char* enum_name(PointwiseStepKind kind);

/// What a binary step combines the running value with (>= 0: that input of the node; 0 is x).
inline constexpr int64_t kOperandNone = -1;     ///< activations and unary steps
inline constexpr int64_t kOperandRunning = -2;  ///< the running value itself (x * x)
inline constexpr int64_t kOperandScalar = -3;   ///< the step's scalar

/// One step: y = op(v) or y = v <op> operand (operand <op> v when swapped).
struct PointwiseStep {
  PointwiseStepKind kind = PointwiseStepKind::kUnary;
  int64_t op = 0;  ///< an ActivationKind, UnaryOp or ElementWiseOp value
  int64_t operand = kOperandNone;
  float scalar = 0.f;
  float alpha = 0.f, beta = 0.f;  ///< activation parameters
  bool swapped = false;
};

/// The program, one entry per step in each list. Inputs: x, then the extra operands the steps name; each
/// broadcasts to x's shape, which is the output's.
struct PointwiseChainAttrs : AttrsOf<PointwiseChainAttrs> {
  std::vector<int64_t> kinds, ops, operands, swapped;
  std::vector<float> scalars, alphas, betas;

  template <class V>
  void visit(V& v) {
    v("kinds", kinds);
    v("ops", ops);
    v("operands", operands);
    v("swapped", swapped);
    v("scalars", scalars);
    v("alphas", alphas);
    v("betas", betas);
  }
  size_t size() const { return kinds.size(); }
  PointwiseStep step(size_t i) const;
  void push(const PointwiseStep& s);
};

/// Checks every step (lists of equal length, ops a chain may hold, operands within `num_inputs`); the error
/// names the step.
Status check_pointwise_program(const PointwiseChainAttrs& attrs, int num_inputs);
/// "sigmoid, * in1, + 0.5": the program for logs.
std::string describe_pointwise_program(const PointwiseChainAttrs& attrs);

}  // namespace kiln
