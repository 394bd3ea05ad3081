// The seed's catalog beyond convolution and GEMM: shuffle + shuffle, shuffle + reduce, reduce -> pooling, the
// reduction fusions and scale + activation; each where it applies and where its restriction forbids it.
#include <gtest/gtest.h>

#include "graph_builders.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using namespace pass_test;

// The optimized copy of `g` (CPU backend hook) and what the passes did.
std::unique_ptr<Graph> optimized(const Graph& g, OptimizerReport& report) {
  auto c = g.clone();
  PassOptions options;
  options.backend = backend_hook(Backend::kCpu);
  EXPECT_TRUE(run_passes(*c, options, &report).is_ok());
  return c;
}

TEST(SeedFusions, ShuffleShuffleThatUndoEachOtherGo) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4});
  Value* r = activation(g, "relu", x, ActivationKind::kRelu);
  Value* t = transpose(g, "t1", r, {0, 2, 1});
  ASSERT_TRUE(g.mark_output(transpose(g, "t2", t, {0, 2, 1})).is_ok());
  ASSERT_TRUE(g.rename_value(g.outputs()[0], "y").is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "shuffle-shuffle"),
            std::vector<std::string>{"removed 't1 + t2': together they change nothing"});
  EXPECT_EQ(o->nodes().size(), 1u);
  EXPECT_EQ(o->outputs()[0]->name, "y");
  expect_same_as_unoptimized(g);
}

TEST(SeedFusions, ShuffleShuffleBecomesOne) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4});
  Value* t = transpose(g, "t", x, {0, 2, 1});
  ASSERT_TRUE(g.mark_output(reshape(g, "r", t, {8, 3})).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "shuffle-shuffle"), std::vector<std::string>{"fused 't + r' into one shuffle"});
  ASSERT_EQ(o->nodes().size(), 1u);
  EXPECT_EQ(o->nodes()[0]->name, "t + r");
  const auto& a = static_cast<const ShuffleAttrs&>(*o->nodes()[0]->attrs);
  EXPECT_EQ(a.first_transpose, (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(a.reshape_dims, (std::vector<int64_t>{8, 3}));
  expect_same_as_unoptimized(g);
}

TEST(SeedFusions, ShuffleShuffleRefusedAcrossATransposeBetweenReshapes) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4});
  auto a = std::make_unique<ShuffleAttrs>();
  a->has_reshape_dims = true;
  a->reshape_dims = {6, 4};
  a->second_transpose = {1, 0};
  Value* s1 = out(g.add_node("Shuffle", "s1", std::move(a), {x}));
  ASSERT_TRUE(g.mark_output(reshape(g, "s2", s1, {2, 12})).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_TRUE(applied_by(report, "shuffle-shuffle").empty());
  ASSERT_EQ(refused_by(report, "shuffle-shuffle").size(), 1u);
  EXPECT_NE(refused_by(report, "shuffle-shuffle")[0].find("reshape on both sides of a transpose"), std::string::npos);
  EXPECT_EQ(o->nodes().size(), 2u);
}

TEST(SeedFusions, ShuffleReduceReadsTheUnpermutedInput) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4});
  Value* t = transpose(g, "t", x, {1, 0, 2});
  ASSERT_TRUE(g.mark_output(reduce(g, "mean", ReduceOp::kMean, t, {0})).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  ASSERT_EQ(applied_by(report, "shuffle-reduce").size(), 1u);
  EXPECT_EQ(applied_by(report, "shuffle-reduce")[0],
            "fused 't + mean': the reduce reads the unpermuted input, then a reshape");
  EXPECT_EQ(o->find_node("t + mean")->op(), "Reduce");
  EXPECT_EQ(static_cast<const ReduceAttrs&>(*o->find_node("t + mean")->attrs).axes, std::vector<int64_t>{1});
  expect_same_as_unoptimized(g);

  // A permutation the kept axes do not survive: reduce, then permute the (smaller) result.
  Graph h;
  Value* y = *h.add_input("y", DataType::kFloat32, {2, 3, 4});
  Value* u = transpose(h, "u", y, {2, 1, 0});
  ASSERT_TRUE(h.mark_output(reduce(h, "sum", ReduceOp::kSum, u, {1})).is_ok());
  OptimizerReport r2;
  optimized(h, r2);
  ASSERT_EQ(applied_by(r2, "shuffle-reduce").size(), 1u);
  EXPECT_NE(applied_by(r2, "shuffle-reduce")[0].find("then permutes the reduced result"), std::string::npos);
  expect_same_as_unoptimized(h);
}

TEST(SeedFusions, ShuffleReduceRefusedWithoutKeepDimensions) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4});
  Value* t = transpose(g, "t", x, {2, 0, 1});
  ASSERT_TRUE(g.mark_output(reduce(g, "mean", ReduceOp::kMean, t, {0}, false)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_TRUE(applied_by(report, "shuffle-reduce").empty());
  EXPECT_EQ(refused_by(report, "shuffle-reduce"),
            std::vector<std::string>{"fusing 't' + 'mean': the reduce drops its axes (keepDimensions is off)"});
}

TEST(SeedFusions, SpatialMeanBecomesGlobalAveragePooling) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 5, 5});
  ASSERT_TRUE(g.mark_output(reduce(g, "gap", ReduceOp::kMean, x, {2, 3})).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "reduce-pooling"),
            std::vector<std::string>{"'gap' (an average over the spatial axes) is a global average pooling"});
  EXPECT_EQ(output_op(*o), "Pooling");
  expect_same_as_unoptimized(g);

  Graph h;
  Value* y = *h.add_input("y", DataType::kFloat32, {2, 3, 5, 5});
  ASSERT_TRUE(h.mark_output(reduce(h, "gap", ReduceOp::kMean, y, {-2, -1}, false)).is_ok());
  OptimizerReport r2;
  auto o2 = optimized(h, r2);
  EXPECT_EQ(output_op(*o2), "Reduce");
  ASSERT_EQ(refused_by(r2, "reduce-pooling").size(), 1u);
  EXPECT_NE(refused_by(r2, "reduce-pooling")[0].find("keepDimensions is off"), std::string::npos);
}

// x -> (pattern) -> y, the pattern made by `make`; expects one Reduce of `op` named `name`.
void expect_reduction(const char* label, ReduceOp op, const std::string& name,
                      const std::function<Value*(Graph&, Value*)>& make) {
  SCOPED_TRACE(label);
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {3, 7});
  ASSERT_TRUE(g.mark_output(make(g, x)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  // The last rewrite makes it (L2Norm is a sum of squares first).
  const auto applied = applied_by(report, "reduction-fusions");
  ASSERT_FALSE(applied.empty());
  EXPECT_EQ(applied.back(), str_cat("fused '", name, "' into one ", label, " reduction"));
  ASSERT_NE(o->find_node(name), nullptr);
  EXPECT_EQ(static_cast<const ReduceAttrs&>(*o->find_node(name)->attrs).op, op);
  expect_same_as_unoptimized(g, 1e-5);
}

TEST(SeedFusions, ReductionFusions) {
  expect_reduction("L1Norm", ReduceOp::kL1, "abs + sum", [](Graph& g, Value* x) {
    return reduce(g, "sum", ReduceOp::kSum, unary(g, "abs", UnaryOp::kAbs, x), {1});
  });
  expect_reduction("sum of squares", ReduceOp::kSumSquare, "sq + sum", [](Graph& g, Value* x) {
    return reduce(g, "sum", ReduceOp::kSum, binary(g, "sq", ElementWiseOp::kProd, x, x), {1});
  });
  expect_reduction("L2Norm", ReduceOp::kL2, "pow + sum + sqrt", [](Graph& g, Value* x) {
    Value* two = constant(g, "two", filled({}, 2.f));
    Value* s = reduce(g, "sum", ReduceOp::kSum, binary(g, "pow", ElementWiseOp::kPow, x, two), {1});
    return unary(g, "sqrt", UnaryOp::kSqrt, s);
  });
  expect_reduction("LogSum", ReduceOp::kLogSum, "sum + log", [](Graph& g, Value* x) {
    Value* positive = activation(g, "sig", x, ActivationKind::kSigmoid);
    return unary(g, "log", UnaryOp::kLog, reduce(g, "sum", ReduceOp::kSum, positive, {1}));
  });
  expect_reduction("LogSumExp", ReduceOp::kLogSumExp, "exp + sum + log", [](Graph& g, Value* x) {
    Value* s = reduce(g, "sum", ReduceOp::kSum, unary(g, "exp", UnaryOp::kExp, x), {0});
    return unary(g, "log", UnaryOp::kLog, s);
  });
}

TEST(SeedFusions, ReductionFusionNeedsTheMiddleValueUnread) {
  // |x| is also an output: it must be computed, so abs + sum stays two layers.
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {3, 7});
  Value* a = unary(g, "abs", UnaryOp::kAbs, x);
  ASSERT_TRUE(g.mark_output(reduce(g, "sum", ReduceOp::kSum, a, {1})).is_ok());
  ASSERT_TRUE(g.mark_output(a).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_TRUE(applied_by(report, "reduction-fusions").empty());
  EXPECT_EQ(o->nodes().size(), 2u);
}

Value* channel_scale(Graph& g, Value* x) {
  auto a = std::make_unique<ScaleAttrs>();
  a->mode = ScaleMode::kChannel;
  Value* shift = constant(g, "shift", ramp({3}, -0.2f));
  Value* scale = constant(g, "scale", ramp({3}, 0.5f, 0.4f));
  return out(g.add_node("Scale", "scale1", std::move(a), {x, shift, scale, nullptr}));
}

TEST(SeedFusions, ScaleActivation) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4, 4});
  ASSERT_TRUE(g.mark_output(activation(g, "relu1", channel_scale(g, x), ActivationKind::kRelu)).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(applied_by(report, "scale-activation"), std::vector<std::string>{"fused 'scale1 + relu1'"});
  ASSERT_EQ(o->nodes().size(), 1u);
  const auto& a = static_cast<const ScaleAttrs&>(*o->nodes()[0]->attrs);
  EXPECT_TRUE(a.fused.on);
  EXPECT_EQ(a.fused.kind, ActivationKind::kRelu);
  expect_same_as_unoptimized(g);
}

TEST(SeedFusions, ScaleActivationRefusesPReluAndSharedResults) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 3, 4, 4});
  Value* s = channel_scale(g, x);
  Value* slope = constant(g, "slope", filled({1}, 0.1f));
  auto prelu = std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kPRelu));
  ASSERT_TRUE(g.mark_output(out(g.add_node("Activation", "prelu", std::move(prelu), {s, slope}))).is_ok());
  OptimizerReport report;
  auto o = optimized(g, report);
  EXPECT_EQ(refused_by(report, "scale-activation"),
            std::vector<std::string>{"fusing 'scale1' + 'prelu': PReLU takes a slope input"});
  EXPECT_EQ(o->nodes().size(), 2u);

  Graph h;
  Value* y = *h.add_input("y", DataType::kFloat32, {2, 3, 4, 4});
  Value* t = channel_scale(h, y);
  ASSERT_TRUE(h.mark_output(activation(h, "relu1", t, ActivationKind::kRelu)).is_ok());
  ASSERT_TRUE(h.mark_output(t).is_ok());  // the scale's result is needed on its own
  OptimizerReport r2;
  auto o2 = optimized(h, r2);
  EXPECT_TRUE(applied_by(r2, "scale-activation").empty());
  EXPECT_EQ(o2->nodes().size(), 2u);
}

}  // namespace
}  // namespace kiln
