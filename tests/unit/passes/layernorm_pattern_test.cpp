// The LayerNorm pattern fusion: the decomposed layer norm older PyTorch exports write, where it applies and
// where it must not.
#include <gtest/gtest.h>

#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "ops/reduce/reduce.h"
#include "ops/unary/unary.h"
#include "pass_test_util.h"
#include "passes/pass_manager.h"

namespace kiln {
namespace {

std::unique_ptr<Attrs> ew(ElementWiseOp op) { return std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)); }
std::unique_ptr<Attrs> mean(std::vector<int64_t> axes) {
  auto a = std::make_unique<ReduceAttrs>();
  a->op = ReduceOp::kMean;
  a->axes = std::move(axes);
  return a;
}
Value* constant(Graph& g, const std::string& name, Dims dims, float base) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + 0.1f * static_cast<float>(i % 7);
  return *g.add_constant(name, std::move(t));
}
Value* out(Node* n) { return n->outputs[0]; }

struct Options {
  Dims x = {2, 3, 16};
  std::vector<int64_t> axes = {-1};
  bool square_by_mul = false;
  bool affine = true;
  Dims param = {16};
  bool eps_input = false;    // epsilon a graph input
  bool gamma_input = false;  // gamma a graph input
  bool diff_is_output = false;
};

// x - mean(x); (that)^2; mean; + eps; sqrt; divide; [* gamma; + beta] -> "y".
std::unique_ptr<Graph> decomposed(const Options& o) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, o.x);
  Node* m1 = *g->add_node("Reduce", "mean", mean(o.axes), {x});
  Node* sub = *g->add_node("ElementWise", "sub", ew(ElementWiseOp::kSub), {x, out(m1)}, {"diff"});
  Node* sq = o.square_by_mul ? *g->add_node("ElementWise", "square", ew(ElementWiseOp::kProd), {out(sub), out(sub)})
                             : *g->add_node("ElementWise", "square", ew(ElementWiseOp::kPow),
                                            {out(sub), constant(*g, "two", {}, 2.f)});
  Node* m2 = *g->add_node("Reduce", "var", mean(o.axes), {out(sq)});
  // A computed epsilon: |eps| of a graph input.
  Value* eps = o.eps_input ? out(*g->add_node("Unary", "abs", std::make_unique<UnaryAttrs>(unary_attrs(UnaryOp::kAbs)),
                                              {*g->add_input("eps", DataType::kFloat32, {})}))
                           : constant(*g, "eps", {}, 1e-5f);
  Node* add = *g->add_node("ElementWise", "add_eps", ew(ElementWiseOp::kSum), {out(m2), eps});
  Node* sqrt = *g->add_node("Unary", "sqrt", std::make_unique<UnaryAttrs>(unary_attrs(UnaryOp::kSqrt)), {out(add)});
  Node* div =
      *g->add_node("ElementWise", "div", ew(ElementWiseOp::kDiv), {out(sub), out(sqrt)}, {o.affine ? "normed" : "y"});
  Value* y = out(div);
  if (o.affine) {
    Value* gamma =
        o.gamma_input ? *g->add_input("gamma", DataType::kFloat32, o.param) : constant(*g, "gamma", o.param, 0.5f);
    Node* mul = *g->add_node("ElementWise", "mul_gamma", ew(ElementWiseOp::kProd), {gamma, y});
    Node* add_b = *g->add_node("ElementWise", "add_beta", ew(ElementWiseOp::kSum),
                               {out(mul), constant(*g, "beta", o.param, -0.3f)}, {"y"});
    y = out(add_b);
  }
  EXPECT_TRUE(g->mark_output(y).is_ok());
  if (o.diff_is_output) {
    EXPECT_TRUE(g->mark_output(out(sub)).is_ok());
  }
  return g;
}

std::unique_ptr<Graph> optimized(const Graph& g, OptimizerReport& report) {
  auto c = g.clone();
  EXPECT_TRUE(run_passes(*c, PassOptions{}, &report).is_ok());
  return c;
}

TEST(LayerNormPattern, FusesWithScaleAndBias) {
  auto g = decomposed({});
  OptimizerReport report;
  auto c = optimized(*g, report);
  EXPECT_EQ(pass_test::applied_by(report, "layernorm-pattern"),
            std::vector<std::string>{"fused 'mean' + 'sub' + 'square' + 'var' + 'add_eps' + 'sqrt' + 'div' + "
                                     "'mul_gamma' + 'add_beta' into LayerNormalization (axis -1, epsilon 1e-05, "
                                     "scale, bias)"});
  ASSERT_EQ(c->nodes().size(), 1u);
  Node* ln = c->nodes()[0];
  EXPECT_EQ(ln->op(), "LayerNormalization");
  EXPECT_EQ(ln->name, "mean + sub + square + var + add_eps + sqrt + div + mul_gamma + add_beta");
  EXPECT_EQ(ln->outputs[0]->name, "y");
  const auto& a = static_cast<const LayerNormalizationAttrs&>(*ln->attrs);
  EXPECT_EQ(a.axis, -1);
  EXPECT_FLOAT_EQ(a.epsilon, 1e-5f);
  EXPECT_EQ(ln->inputs, (std::vector<Value*>{c->find_value("x"), c->find_value("gamma"), c->find_value("beta")}));

  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_EQ(pass_test::applied_by(built.report.optimizer, "layernorm-pattern").size(), 1u);
  // The CPU backend runs it with a fast kernel.
  EXPECT_NE(built.engine_inspect.find("cpu."), std::string::npos) << built.engine_inspect;
  EXPECT_NE(built.engine_inspect.find("layer_normalization"), std::string::npos) << built.engine_inspect;
}

TEST(LayerNormPattern, FusesWithoutAffineOverTwoAxesAndSquareByMul) {
  Options o;
  o.x = {2, 4, 8};
  o.axes = {1, 2};
  o.square_by_mul = true;
  o.affine = false;
  auto g = decomposed(o);
  OptimizerReport report;
  auto c = optimized(*g, report);
  ASSERT_EQ(pass_test::applied_by(report, "layernorm-pattern").size(), 1u);
  ASSERT_EQ(c->nodes().size(), 1u);
  const auto& a = static_cast<const LayerNormalizationAttrs&>(*c->nodes()[0]->attrs);
  EXPECT_EQ(a.axis, -2);
  EXPECT_EQ(c->nodes()[0]->inputs.size(), 1u);
  pass_test::expect_same_as_unoptimized(*g, 1e-5);
}

TEST(LayerNormPattern, ParametersWithLeadingOnesAreReshaped) {
  Options o;
  o.param = {1, 1, 16};
  auto g = decomposed(o);
  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_EQ(pass_test::applied_by(built.report.optimizer, "layernorm-pattern").size(), 1u);
}

void expect_refused(const Options& o, const std::string& why) {
  auto g = decomposed(o);
  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_TRUE(pass_test::applied_by(built.report.optimizer, "layernorm-pattern").empty());
  const std::vector<std::string> refused = pass_test::refused_by(built.report.optimizer, "layernorm-pattern");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find(": " + why), std::string::npos) << refused[0];
  EXPECT_EQ(refused[0].rfind("fusing 'mean' + 'sub' + ", 0), 0u) << refused[0];
}

TEST(LayerNormPattern, RefusesAxesThatAreNotTheLast) {
  Options o;
  o.axes = {1};
  o.param = {3, 1};
  o.affine = false;
  expect_refused(o, "the means run over axes [1] and [1] of a rank-3 input, not both over the same last ones");
}

TEST(LayerNormPattern, RefusesANonConstantEpsilon) {
  Options o;
  o.eps_input = true;
  expect_refused(o, "epsilon 'abs:0' is not a constant scalar");
}

TEST(LayerNormPattern, RefusesANonConstantGamma) {
  Options o;
  o.gamma_input = true;
  expect_refused(o, "the scale (gamma) 'gamma' is not a constant");
}

TEST(LayerNormPattern, RefusesAnIntermediateReadElsewhere) {
  Options o;
  o.diff_is_output = true;
  expect_refused(o, "'diff' is a graph output");
}

}  // namespace
}  // namespace kiln
