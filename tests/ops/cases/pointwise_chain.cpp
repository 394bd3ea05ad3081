#include "ops/pointwise_chain/pointwise_chain.h"

#include "harness.h"
#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/unary/unary.h"

namespace kiln::harness {
namespace {

PointwiseStep act(ActivationKind kind, float alpha = 0.f, float beta = 0.f) {
  return {PointwiseStepKind::kActivation, static_cast<int64_t>(kind), kOperandNone, 0.f, alpha, beta, false};
}
PointwiseStep un(UnaryOp op) { return {PointwiseStepKind::kUnary, static_cast<int64_t>(op)}; }
PointwiseStep bin(ElementWiseOp op, int64_t operand, float scalar = 0.f, bool swapped = false) {
  return {PointwiseStepKind::kBinary, static_cast<int64_t>(op), operand, scalar, 0.f, 0.f, swapped};
}
std::shared_ptr<Attrs> program(std::initializer_list<PointwiseStep> steps) {
  PointwiseChainAttrs a;
  for (const PointwiseStep& s : steps) a.push(s);
  return attrs(a);
}

}  // namespace

KILN_OP_CASES(pointwise_chain) {
  using E = ElementWiseOp;
  std::vector<OpCase> cases;
  cases.push_back({"PointwiseChain",
                   "relu then sigmoid",
                   program({act(ActivationKind::kRelu), act(ActivationKind::kSigmoid)}),
                   {uniform({3, 5, 7})}});
  cases.push_back({"PointwiseChain",
                   "bias, residual, gelu",
                   program({bin(E::kSum, 1), bin(E::kSum, 2), act(ActivationKind::kGelu)}),
                   {uniform({2, 6, 16}), uniform({16}), uniform({2, 6, 16})}});
  // The erf GELU as exported: x / sqrt2, erf, + 1, * x, * 0.5.
  cases.push_back({"PointwiseChain",
                   "decomposed gelu reusing x",
                   program({bin(E::kDiv, kOperandScalar, 1.4142135f), un(UnaryOp::kErf),
                            bin(E::kSum, kOperandScalar, 1.f), bin(E::kProd, 0), bin(E::kProd, kOperandScalar, 0.5f)}),
                   {uniform({4, 3000}, -3, 3)}});
  cases.push_back(
      {"PointwiseChain",
       "swapped operands and itself",
       program({bin(E::kSub, kOperandScalar, 1.f, true), bin(E::kProd, kOperandRunning), bin(E::kDiv, 1, 0.f, true),
                bin(E::kMax, kOperandScalar, 0.2f), bin(E::kPow, kOperandScalar, 0.5f)}),
       {uniform({5, 9}), nonzero({5, 9})}});
  cases.push_back({"PointwiseChain",
                   "general broadcast operand [3,1]",
                   program({un(UnaryOp::kSin), bin(E::kMin, 1), act(ActivationKind::kLeakyRelu, 0.1f)}),
                   {uniform({2, 3, 4}), uniform({3, 1})}});
  cases.push_back({"PointwiseChain",
                   "operands on a middle axis and scalar-like",
                   program({bin(E::kProd, 1), bin(E::kSum, 2), bin(E::kSub, 3, 0.f, true), act(ActivationKind::kTanh)}),
                   {uniform({4, 6, 8}), uniform({6, 1}), uniform({4, 1, 8}), uniform({1, 1, 1})}});
  cases.push_back(
      {"PointwiseChain",
       "unary math",
       program({un(UnaryOp::kAbs), un(UnaryOp::kSqrt), un(UnaryOp::kLog), un(UnaryOp::kExp), un(UnaryOp::kNeg)}),
       {nonzero({7, 11})}});
  cases.push_back(
      {"PointwiseChain", "empty", program({act(ActivationKind::kRelu), un(UnaryOp::kNeg)}), {uniform({0, 4})}});
  OpCase big{"PointwiseChain",
             "bert ffn 1x128x3072 bias gelu",
             program({bin(E::kSum, 1), act(ActivationKind::kGelu)}),
             {uniform({1, 128, 3072}), uniform({3072})}};
  big.dtypes = {DataType::kFloat32};
  cases.push_back(big);
  return cases;
}

}  // namespace kiln::harness
