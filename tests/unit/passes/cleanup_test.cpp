// The cleanup passes: constant folding, common subexpressions (equal constants too), no-op removal; each where it
// applies and where it must not.
#include <gtest/gtest.h>

#include "graph_builders.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using namespace pass_test;

std::unique_ptr<Graph> optimized(const Graph& g, OptimizerReport& report) {
  auto c = g.clone();
  PassOptions options;
  options.disabled = {"pointwise-chain"};  // these graphs are chains of pointwise nodes; the cleanup is under test
  EXPECT_TRUE(run_passes(*c, options, &report).is_ok());
  return c;
}

TEST(Cleanup, ConstantFoldingComputesKnownNodes) {
  // The network API keeps constant subgraphs; the optimizer folds them: y = x + exp(c).
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {4});
  Value* c = constant(g, "c", ramp({4}));
  Value* e = unary(g, "exp", UnaryOp::kExp, c);
  ASSERT_TRUE(g.mark_output(binary(g, "add", ElementWiseOp::kSum, x, e)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "constant-folding"), std::vector<std::string>{"folded 'exp' (Unary) into a constant"});
  ASSERT_EQ(o->nodes().size(), 1u);
  EXPECT_TRUE(o->nodes()[0]->inputs[1]->is_constant());
  expect_same_as_unoptimized(g);
}

TEST(Cleanup, CommonSubexpressionsMergeEqualConstantsAndNodes) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4});
  Value* b1 = constant(g, "b1", ramp({4}));
  Value* b2 = constant(g, "b2", ramp({4}));  // the same bytes under another name
  Value* b3 = constant(g, "b3", ramp({4}, 0.7f));
  Value* a1 = binary(g, "a1", ElementWiseOp::kSum, x, b1);
  Value* a2 = binary(g, "a2", ElementWiseOp::kSum, x, b2);
  Value* a3 = binary(g, "a3", ElementWiseOp::kSum, x, b3);  // another constant: stays
  Value* m = binary(g, "m", ElementWiseOp::kProd, a1, a2);
  ASSERT_TRUE(g.mark_output(binary(g, "y", ElementWiseOp::kProd, m, a3)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(
      applied_by(report, "common-subexpression"),
      (std::vector<std::string>{"constant 'b2' is the same as 'b1'", "'a2' (ElementWise) computes the same as 'a1'"}));
  EXPECT_EQ(o->find_node("a2"), nullptr);
  EXPECT_NE(o->find_node("a3"), nullptr);
  EXPECT_EQ(o->find_node("m")->inputs[0], o->find_node("m")->inputs[1]);
  expect_same_as_unoptimized(g);
}

TEST(Cleanup, CommonSubexpressionKeepsGraphOutputs) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {4});
  ASSERT_TRUE(g.mark_output(activation(g, "r1", x, ActivationKind::kRelu)).is_ok());
  ASSERT_TRUE(g.mark_output(activation(g, "r2", x, ActivationKind::kRelu)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_TRUE(applied_by(report, "common-subexpression").empty());
  EXPECT_EQ(o->outputs().size(), 2u);
  EXPECT_NE(o->outputs()[0]->name, o->outputs()[1]->name);
}

TEST(Cleanup, NoOpRemovalKinds) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3});
  Value* v = activation(g, "relu", x, ActivationKind::kRelu);
  auto cast = std::make_unique<CastAttrs>();
  cast->to = DataType::kFloat32;
  v = out(g.add_node("Cast", "cast", std::move(cast), {v}));
  v = reshape(g, "same_shape", v, {2, 3});
  v = transpose(g, "identity_perm", v, {0, 1});
  v = binary(g, "times_one", ElementWiseOp::kProd, v, constant(g, "one", filled({3}, 1.f)));
  v = binary(g, "zero_plus", ElementWiseOp::kSum, constant(g, "zero", filled({1}, 0.f)), v);
  v = binary(g, "over_one", ElementWiseOp::kDiv, v, constant(g, "one_scalar", filled({}, 1.f)));
  auto scale = std::make_unique<ScaleAttrs>();
  v = out(g.add_node("Scale", "neutral_scale", std::move(scale),
                     {v, constant(g, "shift0", filled({1}, 0.f)), constant(g, "scale1", filled({1}, 1.f)), nullptr}));
  ASSERT_TRUE(g.mark_output(v).is_ok());
  const std::string out_name = v->name;
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "no-op-removal"),
            (std::vector<std::string>{
                "removed 'cast' (Cast): a cast to the same dtype",
                "removed 'same_shape' (Shuffle): a reshape to the same shape",
                "removed 'identity_perm' (Shuffle): a reshape to the same shape",
                "removed 'times_one' (ElementWise): a multiplication by 1",
                "removed 'zero_plus' (ElementWise): an add of 0", "removed 'over_one' (ElementWise): a division by 1",
                "removed 'neutral_scale' (Scale): a scale that adds 0, multiplies by 1, raises to 1"}));
  ASSERT_EQ(o->nodes().size(), 1u);
  EXPECT_EQ(o->outputs()[0]->name, out_name);
  expect_same_as_unoptimized(g);
}

TEST(Cleanup, NoOpRemovalLeavesWhatChangesValuesOrShapes) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 3});
  Value* r = activation(g, "relu", x, ActivationKind::kRelu);
  Value* sq = reshape(g, "square", r, {3, 1});
  ASSERT_TRUE(g.mark_output(transpose(g, "swap", sq, {1, 0})).is_ok());  // a real transpose (shape changes back)
  // Adding zeros that broadcast x to [2, 3] changes the shape: not a no-op.
  ASSERT_TRUE(
      g.mark_output(binary(g, "widen", ElementWiseOp::kSum, r, constant(g, "zeros", filled({2, 3}, 0.f)))).is_ok());
  // Multiplying by 1 only where it is 1 everywhere.
  ASSERT_TRUE(
      g.mark_output(binary(g, "mostly_one", ElementWiseOp::kProd, r, constant(g, "c", ramp({3}, 1.f, 0.5f)))).is_ok());
  // Subtracting from 0 negates.
  ASSERT_TRUE(
      g.mark_output(binary(g, "zero_minus", ElementWiseOp::kSub, constant(g, "z", filled({1}, 0.f)), r)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_TRUE(applied_by(report, "no-op-removal").empty());
  for (const char* name : {"widen", "mostly_one", "zero_minus"}) EXPECT_NE(o->find_node(name), nullptr) << name;
  expect_same_as_unoptimized(g);
}

}  // namespace
}  // namespace kiln
