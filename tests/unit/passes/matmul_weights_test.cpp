// matmul-weights-nk: CPU builds store a MatrixMultiply's constant [K, N] weights as [N, K] with transpose_b set;
// weights another layer also reads, already transposed ones and other backends are left alone; outputs unchanged.
#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ops/matmul/matmul.h"
#include "pass_test_util.h"
#include "passes/passes.h"

namespace kiln {
namespace {

using namespace pass_test;

Value* matmul(Graph& g, const std::string& name, Value* a, Value* b, bool transpose_b = false) {
  auto attrs = std::make_unique<MatrixMultiplyAttrs>();
  attrs->transpose_b = transpose_b;
  return out(g.add_node("MatrixMultiply", name, std::move(attrs), {a, b}));
}

// x [2, 5, 8] -> mm1 (w1 [8, 6]) -> mm2 (w2 [6, 4]) and mm3 (w2 again); mm4 reads w3 [4, 6] transposed already.
std::unique_ptr<Graph> net() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {2, 5, 8});
  Value* h = matmul(*g, "mm1", x, constant(*g, "w1", ramp({8, 6}, -0.5f, 0.021f)));
  Value* w2 = constant(*g, "w2", ramp({6, 4}, 0.4f, -0.03f));
  EXPECT_TRUE(g->mark_output(matmul(*g, "mm2", h, w2)).is_ok());
  Value* y3 = matmul(*g, "mm3", h, w2);
  EXPECT_TRUE(g->mark_output(matmul(*g, "mm4", y3, constant(*g, "w3", ramp({6, 4}, 0.1f, 0.02f)), true)).is_ok());
  return g;
}

const MatrixMultiplyAttrs& attrs_of(const Graph& g, const std::string& node) {
  return static_cast<const MatrixMultiplyAttrs&>(*g.find_node(node)->attrs);
}

TEST(MatmulWeightsNk, CpuBuildsReadConstantWeightsTransposedWithTheSameOutputs) {
  auto g = net();
  Built built = expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_EQ(applied_by(built.report.optimizer, "matmul-weights-nk").size(), 1u);
}

// Runs the pass alone on `g`; returns what it applied.
std::vector<std::string> run_alone(Graph& g, bool asked) {
  LayoutOptions layout;
  layout.matmul_weights_nk = asked;
  const Pass pass = matmul_weights_nk_pass();
  PassContext ctx(g, nullptr, pass.name, {}, layout);
  EXPECT_TRUE(pass.run(ctx).is_ok());
  return ctx.changes();
}

TEST(MatmulWeightsNk, OnlyWeightsReadByOneLayerAndNotYetTransposed) {
  auto g = net();
  EXPECT_EQ(run_alone(*g, true), std::vector<std::string>{"1 MatrixMultiply layers read constant weights as [N, K]"});
  EXPECT_TRUE(attrs_of(*g, "mm1").transpose_b);
  EXPECT_EQ(g->find_node("mm1")->inputs[1]->dims, (Dims{6, 8}));
  EXPECT_EQ(g->find_node("mm1")->inputs[1]->constant.data<float>()[1], -0.5f + 0.021f * 6);  // w1[1][0]
  EXPECT_FALSE(attrs_of(*g, "mm2").transpose_b);  // w2 has two readers: one copy of it stays
  EXPECT_EQ(g->find_node("mm2")->inputs[1]->name, "w2");
  EXPECT_TRUE(attrs_of(*g, "mm4").transpose_b);  // already [N, K]
  EXPECT_EQ(g->find_node("mm4")->inputs[1]->name, "w3");
}

TEST(MatmulWeightsNk, OffUnlessTheBuilderAsks) {
  auto g = net();
  EXPECT_TRUE(run_alone(*g, false).empty());
  EXPECT_FALSE(attrs_of(*g, "mm1").transpose_b);
}

}  // namespace
}  // namespace kiln
