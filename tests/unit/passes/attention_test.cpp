// The attention fusion: graphs shaped as exporters write attention, where it applies and where it must not.
#include <gtest/gtest.h>

#include "onnx/exporter.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/matmul/matmul.h"
#include "ops/shuffle/shuffle.h"
#include "ops/softmax/softmax.h"
#include "pass_test_util.h"
#include "passes/pass_manager.h"

namespace kiln {
namespace {

std::unique_ptr<Attrs> ew(ElementWiseOp op) { return std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)); }
std::unique_ptr<Attrs> matmul(bool transpose_b = false) {
  auto a = std::make_unique<MatrixMultiplyAttrs>();
  a->transpose_b = transpose_b;
  return a;
}
std::unique_ptr<Attrs> softmax(int64_t axis = -1) {
  auto a = std::make_unique<SoftmaxAttrs>();
  a->axis = axis;
  return a;
}
std::unique_ptr<Attrs> transpose(std::vector<int64_t> perm) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->first_transpose = std::move(perm);
  return a;
}
std::unique_ptr<Attrs> reshape(std::vector<int64_t> dims) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->has_reshape_dims = true;
  a->reshape_dims = std::move(dims);
  return a;
}
Value* scalar(Graph& g, const std::string& name, float v) {
  Tensor t = Tensor::empty(DataType::kFloat32, Dims{}).value();
  t.data<float>()[0] = v;
  return *g.add_constant(name, std::move(t));
}
Value* out(Node* n) { return n->outputs[0]; }

// The optimized graph and its report (passes run without a backend hook).
std::unique_ptr<Graph> optimized(const Graph& g, OptimizerReport& report) {
  auto c = g.clone();
  EXPECT_TRUE(run_passes(*c, PassOptions{}, &report).is_ok());
  return c;
}
Node* only_node_of(const Graph& g, std::string_view op) {
  Node* found = nullptr;
  for (Node* n : g.nodes())
    if (n->op() == op) {
      EXPECT_EQ(found, nullptr) << "more than one " << op;
      found = n;
    }
  return found;
}

// BERT's export: x [B, S, H*D] reshaped to heads; q and v transposed [0,2,1,3], k [0,2,3,1]; scores / sqrt(D),
// plus a padding mask [B,1,1,S], softmax, times v.
// With `merge_heads` the context is merged back into [B, S, H*D] (transpose [0,2,1,3], reshape), as BERT does.
std::unique_ptr<Graph> bert_like_graph(bool merge_heads = false) {
  auto g = std::make_unique<Graph>();
  Value* xq = *g->add_input("xq", DataType::kFloat32, {2, 5, 8});
  Value* xk = *g->add_input("xk", DataType::kFloat32, {2, 6, 8});
  Value* xv = *g->add_input("xv", DataType::kFloat32, {2, 6, 8});
  Value* mask = *g->add_input("mask", DataType::kFloat32, {2, 1, 1, 6});
  auto heads = [&](Value* x, const std::string& name, std::vector<int64_t> perm) {
    Node* r = *g->add_node("Shuffle", name + "_reshape", reshape({2, x->dims[1], 2, 4}), {x});
    return out(*g->add_node("Shuffle", name + "_transpose", transpose(std::move(perm)), {out(r)}));
  };
  Value* q = heads(xq, "q", {0, 2, 1, 3});
  Value* kt = heads(xk, "k", {0, 2, 3, 1});
  Value* v = heads(xv, "v", {0, 2, 1, 3});
  Node* qk = *g->add_node("MatrixMultiply", "qk", matmul(), {q, kt});
  Node* div = *g->add_node("ElementWise", "div", ew(ElementWiseOp::kDiv), {out(qk), scalar(*g, "sqrt_d", 2.f)});
  Node* add = *g->add_node("ElementWise", "add_mask", ew(ElementWiseOp::kSum), {out(div), mask});
  Node* sm = *g->add_node("Softmax", "softmax", softmax(), {out(add)});
  Node* pv = *g->add_node("MatrixMultiply", "pv", matmul(), {out(sm), v}, {merge_heads ? "heads" : "context"});
  Value* result = out(pv);
  if (merge_heads) {
    Node* t = *g->add_node("Shuffle", "merge_transpose", transpose({0, 2, 1, 3}), {result});
    result = out(*g->add_node("Shuffle", "merge_reshape", reshape({2, 5, 8}), {out(t)}, {"context"}));
  }
  EXPECT_TRUE(g->mark_output(result).is_ok());
  return g;
}

TEST(AttentionFusion, BertExportWithMaskAndKTransposedAfterAReshape) {
  auto g = bert_like_graph();
  OptimizerReport report;
  auto c = optimized(*g, report);
  const std::vector<std::string> applied = pass_test::applied_by(report, "attention");
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0],
            "fused 'k_transpose' + 'qk' + 'div' + 'add_mask' + 'softmax' + 'pv' into Attention (scale 0.5, masked, k "
            "through 'k_transpose' now transposing to [..., Sk, D])");
  Node* att = only_node_of(*c, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->name, "k_transpose + qk + div + add_mask + softmax + pv");
  EXPECT_EQ(att->outputs[0]->name, "context");
  EXPECT_FLOAT_EQ(static_cast<const AttentionAttrs&>(*att->attrs).scale, 0.5f);
  ASSERT_EQ(att->inputs.size(), 4u);
  EXPECT_EQ(att->inputs[1]->dims, (Dims{2, 2, 6, 4}));  // k untransposed: [B, H, Sk, D]
  // shuffle-shuffle (after the attention pass) merges k's reshape and its new [0, 2, 1, 3] transpose into one.
  EXPECT_EQ(att->inputs[1]->producer->name, "k_reshape + k_transpose");
  const auto& k_shuffle = static_cast<const ShuffleAttrs&>(*att->inputs[1]->producer->attrs);
  EXPECT_EQ(k_shuffle.first_transpose.empty() ? k_shuffle.second_transpose : k_shuffle.first_transpose,
            (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(att->inputs[3]->name, "mask");
  EXPECT_EQ(only_node_of(*c, "Softmax"), nullptr);

  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_EQ(pass_test::applied_by(built.report.optimizer, "attention").size(), 1u);
  EXPECT_NE(built.engine_inspect.find("Attention"), std::string::npos) << built.engine_inspect;
}

TEST(AttentionHeads, TheHeadSplitsAndMergeMoveIntoTheLayer) {
  auto g = bert_like_graph(/*merge_heads=*/true);
  OptimizerReport report;
  auto c = optimized(*g, report);
  const std::vector<std::string> applied = pass_test::applied_by(report, "attention-heads");
  ASSERT_EQ(applied.size(), 1u);
  Node* att = only_node_of(*c, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(static_cast<const AttentionAttrs&>(*att->attrs).heads, 2);
  ASSERT_EQ(att->inputs.size(), 4u);
  EXPECT_EQ(att->inputs[0]->name, "xq");  // the projections themselves, [B, S, H*D]
  EXPECT_EQ(att->inputs[1]->name, "xk");
  EXPECT_EQ(att->inputs[2]->name, "xv");
  EXPECT_EQ(att->inputs[3]->name, "mask");
  EXPECT_EQ(att->outputs[0]->name, "context");
  EXPECT_EQ(att->outputs[0]->dims, (Dims{2, 5, 8}));
  EXPECT_EQ(only_node_of(*c, "Shuffle"), nullptr);

  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_EQ(pass_test::applied_by(built.report.optimizer, "attention-heads").size(), 1u);
}

TEST(AttentionHeads, LeavesHeadsThatAreReadElsewhere) {
  auto g = bert_like_graph(/*merge_heads=*/true);
  // The per-head context [B, H, S, D] is also a graph output: the merge cannot take it.
  ASSERT_TRUE(g->mark_output(g->find_value("heads")).is_ok());
  OptimizerReport report;
  auto c = optimized(*g, report);
  EXPECT_TRUE(pass_test::applied_by(report, "attention-heads").empty());
  Node* att = only_node_of(*c, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(static_cast<const AttentionAttrs&>(*att->attrs).heads, 0);
  pass_test::expect_same_as_unoptimized(*g, 1e-5);
}

// No mask; the scale multiplies q; k^T from a transpose of the last two dims (absorbed: k enters as it is);
// S != Sk.
TEST(AttentionFusion, ScaleOnQWithoutMask) {
  Graph g;
  Value* q = *g.add_input("q", DataType::kFloat32, {3, 7, 4});
  Value* k = *g.add_input("k", DataType::kFloat32, {3, 5, 4});
  Value* v = *g.add_input("v", DataType::kFloat32, {3, 5, 6});
  Node* qs = *g.add_node("ElementWise", "q_scale", ew(ElementWiseOp::kProd), {q, scalar(g, "c", 0.25f)});
  Node* kt = *g.add_node("Shuffle", "kt", transpose({0, 2, 1}), {k});
  Node* qk = *g.add_node("MatrixMultiply", "qk", matmul(), {out(qs), out(kt)});
  Node* sm = *g.add_node("Softmax", "softmax", softmax(2), {out(qk)});
  Node* pv = *g.add_node("MatrixMultiply", "pv", matmul(), {out(sm), v}, {"y"});
  ASSERT_TRUE(g.mark_output(out(pv)).is_ok());

  OptimizerReport report;
  auto c = optimized(g, report);
  ASSERT_EQ(pass_test::applied_by(report, "attention"),
            std::vector<std::string>{"fused 'q_scale' + 'kt' + 'qk' + 'softmax' + 'pv' into Attention (scale 0.25)"});
  Node* att = only_node_of(*c, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->inputs, (std::vector<Value*>{c->find_value("q"), c->find_value("k"), c->find_value("v")}));
  EXPECT_EQ(c->nodes().size(), 1u);
  pass_test::expect_same_as_unoptimized(g, 1e-5);
}

TEST(AttentionFusion, MatMulTransposeBAndMaskFirstInTheAdd) {
  Graph g;
  Value* q = *g.add_input("q", DataType::kFloat32, {2, 3, 4, 8});
  Value* k = *g.add_input("k", DataType::kFloat32, {2, 3, 9, 8});
  Value* v = *g.add_input("v", DataType::kFloat32, {2, 3, 9, 5});
  Value* mask = *g.add_input("mask", DataType::kFloat32, {4, 9});
  Node* qk = *g.add_node("MatrixMultiply", "qk", matmul(true), {q, k});
  Node* mul = *g.add_node("ElementWise", "mul", ew(ElementWiseOp::kProd), {scalar(g, "c", 0.3f), out(qk)});
  Node* add = *g.add_node("ElementWise", "add", ew(ElementWiseOp::kSum), {mask, out(mul)});
  Node* sm = *g.add_node("Softmax", "softmax", softmax(), {out(add)});
  Node* pv = *g.add_node("MatrixMultiply", "pv", matmul(), {out(sm), v}, {"y"});
  ASSERT_TRUE(g.mark_output(out(pv)).is_ok());
  pass_test::Built built = pass_test::expect_same_as_unoptimized(g, 1e-5);
  EXPECT_EQ(pass_test::applied_by(built.report.optimizer, "attention").size(), 1u);
}

// q @ k^T -> scale -> softmax -> @ v with one part changed by `variant`.
enum class Variant { kSoftmaxAxis, kScaleNotConstant, kScoresReadElsewhere };
std::unique_ptr<Graph> broken_graph(Variant variant) {
  auto g = std::make_unique<Graph>();
  Value* q = *g->add_input("q", DataType::kFloat32, {2, 4, 8});
  Value* k = *g->add_input("k", DataType::kFloat32, {2, 4, 8});
  Value* v = *g->add_input("v", DataType::kFloat32, {2, 4, 8});
  Value* divisor = variant == Variant::kScaleNotConstant ? *g->add_input("divisor", DataType::kFloat32, {1})
                                                         : scalar(*g, "divisor", 2.f);
  Node* qk = *g->add_node("MatrixMultiply", "qk", matmul(true), {q, k});
  Node* div = *g->add_node("ElementWise", "div", ew(ElementWiseOp::kDiv), {out(qk), divisor});
  Node* sm = *g->add_node("Softmax", "softmax", softmax(variant == Variant::kSoftmaxAxis ? 1 : -1), {out(div)});
  Node* pv = *g->add_node("MatrixMultiply", "pv", matmul(), {out(sm), v}, {"y"});
  EXPECT_TRUE(g->mark_output(out(pv)).is_ok());
  if (variant == Variant::kScoresReadElsewhere) {
    Node* peek = *g->add_node("ElementWise", "peek", ew(ElementWiseOp::kSum), {out(qk), out(qk)}, {"scores_twice"});
    EXPECT_TRUE(g->mark_output(out(peek)).is_ok());
  }
  return g;
}

void expect_refused(Variant variant, const std::string& why) {
  auto g = broken_graph(variant);
  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g, 1e-5);
  EXPECT_TRUE(pass_test::applied_by(built.report.optimizer, "attention").empty());
  EXPECT_EQ(pass_test::refused_by(built.report.optimizer, "attention"),
            std::vector<std::string>{"fusing 'qk' + 'div' + 'softmax' + 'pv' into Attention: " + why});
  EXPECT_EQ(built.engine_inspect.find("Attention"), std::string::npos);
}

TEST(AttentionFusion, RefusesSoftmaxOverAnotherAxis) {
  expect_refused(Variant::kSoftmaxAxis, "the softmax runs over axis 1, not the last (2)");
}

TEST(AttentionFusion, RefusesAScaleThatIsNotConstant) {
  expect_refused(Variant::kScaleNotConstant,
                 "the scale 'div' is not a division or multiplication by a constant scalar");
}

TEST(AttentionFusion, RefusesScoresReadElsewhere) {
  expect_refused(Variant::kScoresReadElsewhere, "'qk:0' is also read by 'peek'");
}

TEST(AttentionFusion, LeavesASoftmaxThatFeedsNoMatMul) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4});
  Node* sm = *g.add_node("Softmax", "softmax", softmax(), {x}, {"y"});
  ASSERT_TRUE(g.mark_output(out(sm)).is_ok());
  OptimizerReport report;
  optimized(g, report);
  EXPECT_TRUE(pass_test::applied_by(report, "attention").empty());
  EXPECT_TRUE(pass_test::refused_by(report, "attention").empty());
}

TEST(AttentionFusion, TheOpNamesWhatDoesNotFit) {
  Graph g;
  Value* q = *g.add_input("q", DataType::kFloat32, {2, 4, 8});
  Value* k = *g.add_input("k", DataType::kFloat32, {2, 5, 6});
  Value* v = *g.add_input("v", DataType::kFloat32, {2, 5, 3});
  Value* mask = *g.add_input("mask", DataType::kFloat32, {3, 4, 5});
  auto bad_k = g.add_node("Attention", "att", std::make_unique<AttentionAttrs>(), {q, k, v});
  ASSERT_FALSE(bad_k.is_ok());
  EXPECT_NE(bad_k.status().to_string().find("'k' of shape [2, 5, 6] must have the feature size D = 8"),
            std::string::npos)
      << bad_k.status().to_string();
  EXPECT_NE(bad_k.status().to_string().find("att"), std::string::npos) << bad_k.status().to_string();
  Value* k2 = *g.add_input("k2", DataType::kFloat32, {2, 5, 8});
  auto bad_mask = g.add_node("Attention", "att2", std::make_unique<AttentionAttrs>(), {q, k2, v, mask});
  ASSERT_FALSE(bad_mask.is_ok());
  EXPECT_NE(bad_mask.status().to_string().find("'mask' of shape [3, 4, 5] must broadcast to the scores' shape"),
            std::string::npos)
      << bad_mask.status().to_string();
}

TEST(AttentionFusion, OnnxExportRefusesTheFusedLayer) {
  auto g = bert_like_graph();
  OptimizerReport report;
  auto c = optimized(*g, report);
  auto bytes = onnx_export::export_model(*c);
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_NE(bytes.status().message().find("cannot export op Attention"), std::string::npos) << bytes.status().message();
  EXPECT_NE(bytes.status().message().find("k_transpose + qk + div + add_mask + softmax + pv"), std::string::npos);
}

}  // namespace
}  // namespace kiln
