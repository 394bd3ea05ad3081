// Subgraphs in the IR and the host ops that run them: If, Loop, Scan, the sequence and optional ops.
#include <gtest/gtest.h>

#include "builder/builder.h"
#include "graph/unroll_loops.h"
#include "ops/control_flow/control_flow.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

Tensor floats(Dims dims, std::vector<float> v) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

Tensor scalar(DataType d, double v) {
  Tensor t = *Tensor::empty(d, Dims{});
  t.set(0, v);
  return t;
}

std::unique_ptr<Attrs> ew(ElementWiseOp op) {
  auto a = std::make_unique<ElementWiseAttrs>();
  a->op = op;
  return a;
}

// A branch computing op(x, x) of the captured outer value x.
Subgraph branch(const char* name, const Value& x, ElementWiseOp op) {
  Subgraph s{name, std::make_unique<Graph>()};
  Value* cx = *s.graph->add_capture(x);
  Node* n = *s.graph->add_node("ElementWise", std::string(name) + "_op", ew(op), {cx, cx});
  EXPECT_TRUE(s.graph->mark_output(n->outputs[0]).is_ok());
  return s;
}

Result<std::unique_ptr<ContextImpl>> build(const Graph& g, std::shared_ptr<const EngineImpl>& engine) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, build_engine(g, BuildOptions{}));
  KILN_ASSIGN_OR_RETURN(engine, EngineImpl::deserialize(bytes));
  return engine->create_execution_context();
}

TEST(ControlFlow, IfRunsTheTakenBranchWithCaptures) {
  Graph g;
  Value* cond = *g.add_input("cond", DataType::kBool, Dims{});
  Value* x = *g.add_input("x", DataType::kFloat32, Dims{kDynamicDim});
  std::vector<Subgraph> subs;
  subs.push_back(branch("then_branch", *x, ElementWiseOp::kSum));
  subs.push_back(branch("else_branch", *x, ElementWiseOp::kProd));
  auto node = g.add_node("If", "If_0", nullptr, {cond, x}, {"y"}, std::move(subs));
  ASSERT_TRUE(node.is_ok()) << node.status().to_string();
  ASSERT_TRUE(g.mark_output((*node)->outputs[0]).is_ok());
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  EXPECT_NE(g.to_text().find("then_branch: graph("), std::string::npos) << g.to_text();
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  for (bool c : {true, false}) {
    ASSERT_TRUE((*ctx)->set_input("cond", scalar(DataType::kBool, c)).is_ok());
    ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {2, 3})).is_ok());
    ASSERT_TRUE((*ctx)->execute().is_ok());
    Tensor y = *(*ctx)->output("y");
    EXPECT_EQ(y.at(0), c ? 4 : 4);
    EXPECT_EQ(y.at(1), c ? 6 : 9);
  }
}

TEST(ControlFlow, ErrorsInsideASubgraphNameItsPath) {
  Graph g;
  Value* cond = *g.add_input("cond", DataType::kBool, Dims{});
  Value* x = *g.add_input("x", DataType::kFloat32, Dims{kDynamicDim});
  Subgraph then_g{"then_branch", std::make_unique<Graph>()};
  Value* cx = *then_g.graph->add_capture(*x);
  Value* three = *then_g.graph->add_constant("three", floats({3}, {1, 2, 3}));
  Node* add = *then_g.graph->add_node("ElementWise", "Add_7", ew(ElementWiseOp::kSum), {cx, three});
  ASSERT_TRUE(then_g.graph->mark_output(add->outputs[0]).is_ok());
  std::vector<Subgraph> subs;
  subs.push_back(std::move(then_g));
  subs.push_back(branch("else_branch", *x, ElementWiseOp::kProd));
  Node* n = *g.add_node("If", "If_3404", nullptr, {cond, x}, {"y"}, std::move(subs));
  ASSERT_TRUE(g.mark_output(n->outputs[0]).is_ok());
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("cond", scalar(DataType::kBool, 1)).is_ok());
  ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {2, 3})).is_ok());
  Status s = (*ctx)->execute();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("If_3404/then_branch/node"), std::string::npos) << s.to_string();
  EXPECT_NE(s.to_string().find("'Add_7'"), std::string::npos) << s.to_string();
}

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, Dims{2});
  Value* m = *g.add_constant("M", [] {
    Tensor t = *Tensor::empty(DataType::kInt64, Dims{});
    t.data<int64_t>()[0] = 3;
    return t;
  }());
  Value* acc0 = *g.add_constant("acc0", floats({2}, {0, 0}));
  Subgraph body{"body", std::make_unique<Graph>()};
  Graph& b = *body.graph;
  (void)*b.add_input("i", DataType::kInt64, Dims{});
  Value* c = *b.add_input("c", DataType::kBool, Dims{});
  Value* acc = *b.add_input("acc", DataType::kFloat32, Dims{kDynamicDim});
  Value* bx = *b.add_capture(*x);
  Node* sum = *b.add_node("ElementWise", "sum", ew(ElementWiseOp::kSum), {acc, bx});
  Node* keep = *b.add_node("Identity", "keep", nullptr, {c});
  ASSERT_TRUE(b.mark_output(keep->outputs[0]).is_ok());
  ASSERT_TRUE(b.mark_output(sum->outputs[0]).is_ok());
  Node* scan = *b.add_node("Identity", "scan", nullptr, {sum->outputs[0]});
  ASSERT_TRUE(b.mark_output(scan->outputs[0]).is_ok());
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  auto loop = g.add_node("Loop", "Loop_0", nullptr, {m, nullptr, acc0, x}, {"final", "all"}, std::move(subs));
  ASSERT_TRUE(loop.is_ok()) << loop.status().to_string();
  EXPECT_EQ((*loop)->outputs[1]->dims, (Dims{kDynamicDim, 2}));
  ASSERT_TRUE(g.mark_output((*loop)->outputs[0]).is_ok());
  ASSERT_TRUE(g.mark_output((*loop)->outputs[1]).is_ok());
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {1, 2})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  Tensor fin = *(*ctx)->output("final"), all = *(*ctx)->output("all");
  EXPECT_EQ(fin.at(1), 6);
  EXPECT_EQ(all.dims(), (Dims{3, 2}));
  EXPECT_EQ(all.at(2), 2);
}

// A Loop of `trips` trips adding the captured x to a carried accumulator; with `scan`, it also stacks the sums.
Node* accumulate_loop(Graph& g, int64_t trips, bool scan) {
  Value* x = g.find_value("x");
  Value* m = *g.add_constant("M", scalar(DataType::kInt64, static_cast<double>(trips)));
  Value* acc0 = *g.add_constant("acc0", floats({2}, {0, 0}));
  Subgraph body{"body", std::make_unique<Graph>()};
  Graph& b = *body.graph;
  Value* i = *b.add_input("i", DataType::kInt64, Dims{});
  Value* c = *b.add_input("c", DataType::kBool, Dims{});
  Value* acc = *b.add_input("acc", DataType::kFloat32, Dims{kDynamicDim});
  Value* bx = *b.add_capture(*x);
  Node* fi = *b.add_node("Cast", "fi",
                         [] {
                           auto a = std::make_unique<CastAttrs>();
                           a->to = DataType::kFloat32;
                           return a;
                         }(),
                         {i});
  Node* step = *b.add_node("ElementWise", "step", ew(ElementWiseOp::kSum), {bx, fi->outputs[0]});
  Node* sum = *b.add_node("ElementWise", "sum", ew(ElementWiseOp::kSum), {acc, step->outputs[0]});
  Node* keep = *b.add_node("Identity", "keep", nullptr, {c});
  EXPECT_TRUE(b.mark_output(keep->outputs[0]).is_ok());
  EXPECT_TRUE(b.mark_output(sum->outputs[0]).is_ok());
  if (scan) {
    Node* stacked = *b.add_node("Identity", "stacked", nullptr, {sum->outputs[0]});
    EXPECT_TRUE(b.mark_output(stacked->outputs[0]).is_ok());
  }
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  std::vector<std::string> names{"final"};
  if (scan) names.emplace_back("all");
  auto loop = g.add_node("Loop", "Loop_0", nullptr, {m, nullptr, acc0, x}, names, std::move(subs));
  EXPECT_TRUE(loop.is_ok()) << loop.status().to_string();
  for (Value* out : (*loop)->outputs) {
    EXPECT_TRUE(g.mark_output(out).is_ok());
  }
  return *loop;
}

TEST(ControlFlow, UnrollsASmallLoopWithAConstantTripCount) {
  Graph g;
  (void)*g.add_input("x", DataType::kFloat32, Dims{2});
  accumulate_loop(g, 3, false);
  auto n = unroll_small_loops(g);
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  for (Node* node : g.nodes()) {
    EXPECT_NE(node->op(), "Loop");
  }
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {1, 2})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  Tensor fin = *(*ctx)->output("final");  // the output keeps its name: sum of (x + i) for i = 0, 1, 2
  EXPECT_EQ(fin.at(0), 6);
  EXPECT_EQ(fin.at(1), 9);
}

TEST(ControlFlow, KeepsLoopsItCannotUnroll) {
  for (auto [trips, scan] : {std::pair<int64_t, bool>{100, false}, {3, true}}) {
    Graph g;
    (void)*g.add_input("x", DataType::kFloat32, Dims{2});
    accumulate_loop(g, trips, scan);
    auto n = unroll_small_loops(g);
    ASSERT_TRUE(n.is_ok()) << n.status().to_string();
    EXPECT_EQ(*n, 0) << trips << " trips, scan outputs " << scan;
  }
}

TEST(ControlFlow, UnrollingZeroTripsPassesTheInitialValuesThrough) {
  Graph g;
  (void)*g.add_input("x", DataType::kFloat32, Dims{2});
  accumulate_loop(g, 0, false);
  ASSERT_EQ(*unroll_small_loops(g), 1);
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {1, 2})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  EXPECT_EQ((*ctx)->output("final")->at(1), 0);
}

TEST(ControlFlow, SequenceOps) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, Dims{2});
  Node* seq = *g.add_node("SequenceConstruct", "construct", nullptr, {x, x});
  Node* ins = *g.add_node("SequenceInsert", "insert", nullptr, {seq->outputs[0], x});
  Node* len = *g.add_node("SequenceLength", "len", nullptr, {ins->outputs[0]});
  auto cat_attrs = std::make_unique<ConcatFromSequenceAttrs>();
  cat_attrs->new_axis = true;
  Node* cat = *g.add_node("ConcatFromSequence", "cat", std::move(cat_attrs), {ins->outputs[0]});
  EXPECT_EQ(ins->outputs[0]->kind, ValueKind::kSequence);
  ASSERT_TRUE(g.mark_output(len->outputs[0]).is_ok());
  ASSERT_TRUE(g.mark_output(cat->outputs[0]).is_ok());
  ASSERT_TRUE(g.mark_output(ins->outputs[0]).is_ok());
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("x", floats({2}, {1, 2})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  EXPECT_EQ((*(*ctx)->output(len->outputs[0]->name)).at(0), 3);
  EXPECT_EQ((*(*ctx)->output(cat->outputs[0]->name)).dims(), (Dims{3, 2}));
  auto s = (*ctx)->output_value(ins->outputs[0]->name);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->items.size(), 3u);
  EXPECT_FALSE((*ctx)->output(ins->outputs[0]->name).is_ok()) << "a sequence is not a tensor";
  // Ordinary ops refuse sequences with a message.
  auto bad = g.add_node("ElementWise", "bad", ew(ElementWiseOp::kSum), {seq->outputs[0], x});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("is a sequence; it takes tensors"), std::string::npos);
}

TEST(ControlFlow, ScanCarriesStateAndStacksPerStepOutputs) {
  Graph g;
  Value* s0 = *g.add_input("s0", DataType::kFloat32, Dims{2});
  Value* xs = *g.add_input("xs", DataType::kFloat32, Dims{3, 2});
  Subgraph body{"body", std::make_unique<Graph>()};
  Graph& b = *body.graph;
  Value* s = *b.add_input("s", DataType::kFloat32, Dims{kDynamicDim});
  Value* xt = *b.add_input("xt", DataType::kFloat32, Dims{kDynamicDim});
  Node* sum = *b.add_node("ElementWise", "sum", ew(ElementWiseOp::kSum), {s, xt});
  Node* copy = *b.add_node("Identity", "copy", nullptr, {sum->outputs[0]});
  ASSERT_TRUE(b.mark_output(sum->outputs[0]).is_ok());
  ASSERT_TRUE(b.mark_output(copy->outputs[0]).is_ok());
  auto attrs = std::make_unique<ScanAttrs>();
  attrs->num_scan_inputs = 1;
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  auto scan = g.add_node("Scan", "scan", std::move(attrs), {s0, xs}, {"final", "running"}, std::move(subs));
  ASSERT_TRUE(scan.is_ok()) << scan.status().to_string();
  ASSERT_TRUE(g.mark_output((*scan)->outputs[0]).is_ok());
  ASSERT_TRUE(g.mark_output((*scan)->outputs[1]).is_ok());
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("s0", floats({2}, {10, 20})).is_ok());
  ASSERT_TRUE((*ctx)->set_input("xs", floats({3, 2}, {1, 2, 3, 4, 5, 6})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  Tensor fin = *(*ctx)->output("final"), running = *(*ctx)->output("running");
  EXPECT_EQ(fin.at(0), 19);  // 10 + 1 + 3 + 5
  EXPECT_EQ(fin.at(1), 32);
  EXPECT_EQ(running.dims(), (Dims{3, 2}));
  EXPECT_EQ(running.at(2), 14);  // after the second step
}

TEST(ControlFlow, SplitMapAtEraseAndEmptySequences) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, Dims{3, 2});
  auto split = std::make_unique<SplitToSequenceAttrs>();
  split->keepdims = false;
  Node* seq = *g.add_node("SplitToSequence", "split", std::move(split), {x});
  Subgraph body{"body", std::make_unique<Graph>()};
  Value* e = *body.graph->add_input("e", DataType::kFloat32, Dims{kDynamicDim});
  Node* sq = *body.graph->add_node("ElementWise", "square", ew(ElementWiseOp::kProd), {e, e});
  ASSERT_TRUE(body.graph->mark_output(sq->outputs[0]).is_ok());
  std::vector<Subgraph> subs;
  subs.push_back(std::move(body));
  auto mapped = g.add_node("SequenceMap", "map", nullptr, {seq->outputs[0]}, {"squares"}, std::move(subs));
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  Value* last_pos = *g.add_constant("last_pos", scalar(DataType::kInt64, -1));
  Node* last = *g.add_node("SequenceAt", "last", nullptr, {(*mapped)->outputs[0], last_pos});
  Node* erased = *g.add_node("SequenceErase", "erase", nullptr, {(*mapped)->outputs[0]});
  Node* erased_len = *g.add_node("SequenceLength", "erased_len", nullptr, {erased->outputs[0]});
  Node* empty = *g.add_node("SequenceEmpty", "empty", std::make_unique<SequenceEmptyAttrs>(), {});
  Node* empty_len = *g.add_node("SequenceLength", "empty_len", nullptr, {empty->outputs[0]});
  for (Node* n : {last, erased_len, empty_len}) {
    ASSERT_TRUE(g.mark_output(n->outputs[0]).is_ok());
  }
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  ASSERT_TRUE((*ctx)->set_input("x", floats({3, 2}, {1, 2, 3, 4, 5, 6})).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  Tensor l = *(*ctx)->output(last->outputs[0]->name);
  EXPECT_EQ(l.dims(), (Dims{2}));
  EXPECT_EQ(l.at(0), 25);
  EXPECT_EQ(l.at(1), 36);
  EXPECT_EQ((*(*ctx)->output(erased_len->outputs[0]->name)).at(0), 2);  // erases the last element by default
  EXPECT_EQ((*(*ctx)->output(empty_len->outputs[0]->name)).at(0), 0);
}

TEST(ControlFlow, OptionalOps) {
  Graph g;
  Node* empty = *g.add_node("Optional", "none", nullptr, {});
  Node* has = *g.add_node("OptionalHasElement", "has", nullptr, {empty->outputs[0]});
  Node* get = *g.add_node("OptionalGetElement", "get", nullptr, {empty->outputs[0]});
  ASSERT_TRUE(g.mark_output(has->outputs[0]).is_ok());
  ASSERT_TRUE(g.mark_output(get->outputs[0]).is_ok());
  std::shared_ptr<const EngineImpl> engine;
  auto ctx = build(g, engine);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  Status s = (*ctx)->execute();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("the optional is empty"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace kiln
