// The pointwise-chain fusion: chains of activations, unary and binary pointwise nodes, where it applies and where
// it must stop or refuse.
#include <gtest/gtest.h>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/pointwise_chain/pointwise_chain.h"
#include "ops/unary/unary.h"
#include "pass_test_util.h"
#include "passes/pass_manager.h"

namespace kiln {
namespace {

std::unique_ptr<Attrs> act(ActivationKind kind) { return std::make_unique<ActivationAttrs>(activation_defaults(kind)); }
std::unique_ptr<Attrs> ew(ElementWiseOp op) { return std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)); }
std::unique_ptr<Attrs> un(UnaryOp op) { return std::make_unique<UnaryAttrs>(unary_attrs(op)); }
Value* constant(Graph& g, const std::string& name, Dims dims, float base) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + 0.25f * static_cast<float>(i % 5);
  return *g.add_constant(name, std::move(t));
}
Value* out(Node* n) { return n->outputs[0]; }

std::unique_ptr<Graph> optimized(const Graph& g, OptimizerReport& report) {
  auto c = g.clone();
  PassOptions options;
  options.disabled = {"gelu-pattern"};  // so the exported GELU stays pointwise nodes for the chain to take
  EXPECT_TRUE(run_passes(*c, options, &report).is_ok());
  return c;
}
std::vector<Node*> nodes_of(const Graph& g, std::string_view op) {
  std::vector<Node*> out;
  for (Node* n : g.nodes())
    if (n->op() == op) out.push_back(n);
  return out;
}

// x + bias -> + residual -> exported erf GELU (/ sqrt2, erf, + 1, * its input, * 0.5) -> sigmoid -> "y".
TEST(PointwiseChainFusion, FusesBiasResidualAndAnExportedGelu) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 8});
  Value* residual = *g.add_input("residual", DataType::kFloat32, {2, 3, 8});
  Node* bias = *g.add_node("ElementWise", "bias", ew(ElementWiseOp::kSum), {constant(g, "b", {8}, -0.5f), x});
  Node* res = *g.add_node("ElementWise", "res", ew(ElementWiseOp::kSum), {out(bias), residual});
  Node* div =
      *g.add_node("ElementWise", "div", ew(ElementWiseOp::kDiv), {out(res), constant(g, "sqrt2", {}, 1.4142135f)});
  Node* erf = *g.add_node("Unary", "erf", un(UnaryOp::kErf), {out(div)});
  Node* add1 = *g.add_node("ElementWise", "add1", ew(ElementWiseOp::kSum), {out(erf), constant(g, "one", {}, 1.f)});
  Node* mul = *g.add_node("ElementWise", "mul", ew(ElementWiseOp::kProd), {out(res), out(add1)});
  Node* half = *g.add_node("ElementWise", "half", ew(ElementWiseOp::kProd), {out(mul), constant(g, "h", {}, 0.5f)});
  Node* sig = *g.add_node("Activation", "sig", act(ActivationKind::kSigmoid), {out(half)}, {"y"});
  ASSERT_TRUE(g.mark_output(out(sig)).is_ok());

  OptimizerReport report;
  auto c = optimized(g, report);
  // res's output is read twice (div and mul): the first chain stops there; the second takes it as x and operand.
  EXPECT_EQ(pass_test::applied_by(report, "pointwise-chain"),
            (std::vector<std::string>{
                "fused 'bias' + 'res' into PointwiseChain (in1 + _, + in2)",
                "fused 'div' + 'erf' + 'add1' + 'mul' + 'half' + 'sig' into PointwiseChain (/ 1.41421, erf, + 1, in0 * "
                "_, * 0.5, sigmoid)"}));
  const std::vector<Node*> chains = nodes_of(*c, "PointwiseChain");
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(c->nodes().size(), 2u);
  EXPECT_EQ(chains[1]->name, "div + erf + add1 + mul + half + sig");
  EXPECT_EQ(chains[1]->outputs[0]->name, "y");
  EXPECT_EQ(chains[1]->inputs.size(), 1u);  // the reuse of x is input 0 again
  EXPECT_EQ(chains[0]->inputs,
            (std::vector<Value*>{c->find_value("x"), c->find_value("b"), c->find_value("residual")}));
  EXPECT_EQ(static_cast<const PointwiseChainAttrs&>(*chains[1]->attrs).size(), 6u);

  pass_test::Built built = pass_test::expect_same_as_unoptimized(g, 1e-5);
  EXPECT_NE(built.engine_inspect.find("cpu.pointwise_chain"), std::string::npos) << built.engine_inspect;
}

// relu -> tanh -> neg -> exp where tanh's output is also a graph output: two chains, split after tanh.
TEST(PointwiseChainFusion, StopsWhereAMiddleValueIsReadElsewhere) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {4, 6});
  Node* relu = *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {x});
  Node* tanh = *g.add_node("Activation", "tanh", act(ActivationKind::kTanh), {out(relu)}, {"t"});
  Node* neg = *g.add_node("Unary", "neg", un(UnaryOp::kNeg), {out(tanh)});
  Node* exp = *g.add_node("Unary", "exp", un(UnaryOp::kExp), {out(neg)}, {"y"});
  ASSERT_TRUE(g.mark_output(out(exp)).is_ok());
  ASSERT_TRUE(g.mark_output(out(tanh)).is_ok());
  OptimizerReport report;
  auto c = optimized(g, report);
  EXPECT_EQ(pass_test::applied_by(report, "pointwise-chain"),
            (std::vector<std::string>{"fused 'relu' + 'tanh' into PointwiseChain (relu, tanh)",
                                      "fused 'neg' + 'exp' into PointwiseChain (neg, exp)"}));
  EXPECT_EQ(c->find_value("t")->producer->name, "relu + tanh");
  pass_test::expect_same_as_unoptimized(g, 1e-6);
}

TEST(PointwiseChainFusion, RefusesAnIntChain) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kInt32, {4, 6});
  Node* abs = *g.add_node("Unary", "abs", un(UnaryOp::kAbs), {x});
  Node* neg = *g.add_node("Unary", "neg", un(UnaryOp::kNeg), {out(abs)}, {"y"});
  ASSERT_TRUE(g.mark_output(out(neg)).is_ok());
  OptimizerReport report;
  auto c = optimized(g, report);
  EXPECT_TRUE(pass_test::applied_by(report, "pointwise-chain").empty());
  EXPECT_EQ(pass_test::refused_by(report, "pointwise-chain"),
            std::vector<std::string>{
                "fusing 'abs' + 'neg' into PointwiseChain: 'abs:0' is int32 (only float32 chains are fused)"});
  EXPECT_EQ(c->nodes().size(), 2u);
}

// A PReLU, a tensor operand that broadcasts (not a constant) and a lone node never join a chain.
TEST(PointwiseChainFusion, LeavesWhatCannotJoin) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {4, 6});
  Value* row = *g.add_input("row", DataType::kFloat32, {6});
  Node* prelu = *g.add_node("Activation", "prelu", act(ActivationKind::kPRelu), {x, constant(g, "slope", {6}, 0.1f)});
  Node* add = *g.add_node("ElementWise", "add_row", ew(ElementWiseOp::kSum), {out(prelu), row});
  Node* relu = *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {out(add)}, {"y"});
  ASSERT_TRUE(g.mark_output(out(relu)).is_ok());
  OptimizerReport report;
  auto c = optimized(g, report);
  EXPECT_TRUE(pass_test::applied_by(report, "pointwise-chain").empty());
  EXPECT_EQ(c->nodes().size(), 3u);
}

}  // namespace
}  // namespace kiln
