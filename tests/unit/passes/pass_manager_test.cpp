// The optimizer's infrastructure: Graph::clone and set_input, the pattern helpers, the pass manager (names,
// disabling, dumps, reports) and the engine's record of what it did.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/softmax/softmax.h"
#include "pass_test_util.h"
#include "passes/pattern.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

std::unique_ptr<Attrs> act(ActivationKind kind) { return std::make_unique<ActivationAttrs>(activation_defaults(kind)); }
std::unique_ptr<Attrs> ew(ElementWiseOp op) { return std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)); }
Tensor filled(Dims dims, float v) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

// x -> relu -> (+ 0) -> softmax -> y, with a dead branch and a duplicate relu. (A softmax, not a pointwise op,
// at the end: pointwise-chain has its own tests and would fuse 'both' with it.)
std::unique_ptr<Graph> sample_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {2, 8});
  Value* zero = *g->add_constant("zero", filled({8}, 0.f));
  Node* relu = *g->add_node("Activation", "relu", act(ActivationKind::kRelu), {x});
  Node* relu2 = *g->add_node("Activation", "relu_again", act(ActivationKind::kRelu), {x});
  Node* add0 = *g->add_node("ElementWise", "add0", ew(ElementWiseOp::kSum), {relu->outputs[0], zero});
  Node* both = *g->add_node("ElementWise", "both", ew(ElementWiseOp::kProd), {add0->outputs[0], relu2->outputs[0]});
  Node* sig = *g->add_node("Softmax", "sig", std::make_unique<SoftmaxAttrs>(), {both->outputs[0]}, {"y"});
  *g->add_node("Activation", "unused", act(ActivationKind::kTanh), {x});
  EXPECT_TRUE(g->mark_output(sig->outputs[0]).is_ok());
  return g;
}

TEST(Passes, CloneIsDeepAndEqual) {
  auto g = sample_graph();
  auto c = g->clone();
  EXPECT_EQ(c->to_text(), g->to_text());
  EXPECT_TRUE(c->verify().is_ok()) << c->verify().to_string();
  // Changing the clone leaves the original as it was.
  const std::string before = g->to_text();
  c->remove_dead_nodes();
  ASSERT_TRUE(c->rename_node(c->find_node("sig"), "renamed").is_ok());
  EXPECT_EQ(g->to_text(), before);
  EXPECT_NE(g->find_node("unused"), nullptr);
  EXPECT_EQ(c->find_node("unused"), nullptr);
  EXPECT_EQ(c->find_value("y")->producer, c->find_node("renamed"));
}

TEST(Passes, SetInputKeepsUsesCurrent) {
  auto g = sample_graph();
  Node* sig = g->find_node("sig");
  Value* x = g->find_value("x");
  Value* old = sig->inputs[0];
  ASSERT_TRUE(g->set_input(sig, 0, x).is_ok());
  EXPECT_TRUE(old->uses.empty());
  EXPECT_EQ(std::count_if(x->uses.begin(), x->uses.end(), [&](const Use& u) { return u.node == sig; }), 1);
  EXPECT_FALSE(g->set_input(sig, 3, x).is_ok());
  Graph other;
  Value* foreign = *other.add_input("f", DataType::kFloat32, {2, 8});
  EXPECT_FALSE(g->set_input(sig, 0, foreign).is_ok());
}

TEST(Passes, MatchChainFollowsSoleConsumers) {
  auto g = sample_graph();
  Node* relu = g->find_node("relu");
  auto chain = match_chain(*g, relu, {{"Activation"}, {"ElementWise"}, {"ElementWise"}});
  ASSERT_TRUE(chain.has_value());
  EXPECT_EQ(fused_name(*chain), "relu + add0 + both");
  EXPECT_FALSE(match_chain(*g, relu, {{"Activation"}, {"Activation"}}).has_value());
  auto is_sum = [](const Node& n) { return static_cast<const ElementWiseAttrs&>(*n.attrs).op == ElementWiseOp::kSum; };
  EXPECT_TRUE(match_chain(*g, relu, {{"Activation"}, {"ElementWise", is_sum}}).has_value());
  EXPECT_FALSE(match_chain(*g, g->find_node("add0"), {{"ElementWise", is_sum}, {"ElementWise", is_sum}}).has_value());
  // x has three readers: no sole consumer.
  EXPECT_EQ(sole_consumer(*g, g->find_value("x")), nullptr);
  // A graph output has none either.
  EXPECT_EQ(sole_consumer(*g, g->find_value("y")), nullptr);
}

TEST(Passes, ReplaceWithNodeKeepsOutputNamesAndRefusesOutsideReaders) {
  auto g = sample_graph();
  PassContext ctx(*g, nullptr, "test");
  std::vector<Node*> both_sig = {g->find_node("both"), g->find_node("sig")};
  auto fused =
      replace_with_node(ctx, both_sig, "Activation", act(ActivationKind::kSigmoid), {g->find_node("add0")->outputs[0]});
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  EXPECT_EQ((*fused)->name, "both + sig");
  EXPECT_EQ((*fused)->outputs[0]->name, "y");
  EXPECT_EQ(g->outputs()[0], (*fused)->outputs[0]);
  EXPECT_TRUE(g->verify().is_ok()) << g->verify().to_string();
  // relu's output is read by add0, outside the group: refused, graph unchanged.
  const std::string before = g->to_text();
  std::vector<Node*> relu_only = {g->find_node("relu"), g->find_node("unused")};
  auto refused = replace_with_node(ctx, relu_only, "Activation", act(ActivationKind::kTanh), {g->find_value("x")});
  EXPECT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("also read by 'add0'"), std::string::npos) << refused.status().message();
  EXPECT_EQ(g->to_text(), before);
  // The backend hook's refusal leaves the graph as it was and says why.
  PassContext picky(
      *g, [](const Node&) { return unsupported("no kernel here"); }, "test");
  std::vector<Node*> unused = {g->find_node("unused")};
  auto hook = replace_with_node(picky, unused, "Activation", act(ActivationKind::kRelu), {g->find_value("x")});
  ASSERT_FALSE(hook.is_ok());
  EXPECT_EQ(hook.status().message(), "no kernel here");
  EXPECT_EQ(g->to_text(), before);
}

TEST(Passes, ManagerRunsNamedPassesAndReportsEachChange) {
  auto g = sample_graph();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*g, PassOptions{}, &report).is_ok());
  EXPECT_EQ(report.nodes_before, 6u);
  EXPECT_EQ(pass_test::applied_by(report, "no-op-removal"),
            std::vector<std::string>{"removed 'add0' (ElementWise): an add of 0"});
  EXPECT_EQ(pass_test::applied_by(report, "common-subexpression"),
            std::vector<std::string>{"'relu_again' (Activation) computes the same as 'relu'"});
  EXPECT_EQ(pass_test::applied_by(report, "dead-code"),
            std::vector<std::string>{"removed 'unused': nothing reads its outputs"});
  EXPECT_EQ(report.nodes_after, 3u);
  EXPECT_EQ(g->find_node("both")->inputs[0], g->find_node("both")->inputs[1]);
  EXPECT_EQ(g->outputs()[0]->name, "y");
  bool listed = false;
  for (const PassRecord& p : report.passes) listed = listed || (p.pass == "dead-code" && p.changes == 1);
  EXPECT_TRUE(listed);
}

TEST(Passes, DisabledByNameAndAllOff) {
  auto g = sample_graph();
  PassOptions options;
  options.disabled = {"no-op-removal", "dead-code", "pointwise-chain"};  // the last would fuse add0 + both
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*g, options, &report).is_ok());
  EXPECT_TRUE(pass_test::applied_by(report, "no-op-removal").empty());
  EXPECT_NE(g->find_node("add0"), nullptr);
  EXPECT_NE(g->find_node("unused"), nullptr);
  EXPECT_EQ(g->find_node("relu_again"), nullptr);  // common-subexpression still ran

  auto g2 = sample_graph();
  PassOptions off;
  off.enabled = false;
  ASSERT_TRUE(run_passes(*g2, off, &report).is_ok());
  EXPECT_EQ(g2->to_text(), sample_graph()->to_text());

  PassOptions typo;
  typo.disabled = {"no-op-removel"};
  Status st = run_passes(*g2, typo, &report);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no optimizer pass 'no-op-removel'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no-op-removal"), std::string::npos) << st.message();
}

TEST(Passes, DumpsTheGraphBeforeAndAfterEachChangingPass) {
  const auto dir = std::filesystem::temp_directory_path() / "kiln_dump_graph_test";
  std::filesystem::remove_all(dir);
  auto g = sample_graph();
  PassOptions options;
  options.dump_dir = dir.string();
  ASSERT_TRUE(run_passes(*g, options).is_ok());
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"00-input.txt", "01-no-op-removal.txt", "02-common-subexpression.txt",
                                             "03-dead-code.txt"}));
  std::ifstream last(dir / "03-dead-code.txt");
  std::stringstream text;
  text << last.rdbuf();
  EXPECT_EQ(text.str(), g->to_text());
  std::filesystem::remove_all(dir);
  // A dump folder that cannot be made is an error naming it.
  PassOptions bad;
  bad.dump_dir = "/proc/kiln-no-such/dir";
  Status st = run_passes(*sample_graph(), bad);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("/proc/kiln-no-such/dir"), std::string::npos) << st.message();
}

TEST(Passes, BuilderOptimizesACopyAndTheEngineRecordsIt) {
  auto g = sample_graph();
  const std::string before = g->to_text();
  pass_test::Built built = pass_test::expect_same_as_unoptimized(*g);
  EXPECT_EQ(g->to_text(), before);  // the caller's graph is untouched
  EXPECT_EQ(built.report.optimizer.nodes_after, 3u);
  EXPECT_EQ(built.engine_inspect.find("add0"), std::string::npos) << built.engine_inspect;

  BuildOptions options;
  auto bytes = build_engine(*g, options);
  ASSERT_TRUE(bytes.is_ok());
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok());
  const std::string info = layer_info_json(**engine);
  EXPECT_NE(info.find("\"Optimizer\""), std::string::npos) << info;
  EXPECT_NE(info.find("removed 'add0' (ElementWise): an add of 0"), std::string::npos) << info;
}

TEST(Passes, NoOpRemovalKeepsGraphOutputNames) {
  // x -> relu -> identity -> y: the identity goes, relu's output takes the name y.
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {4});
  Node* relu = *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {x});
  Node* id = *g.add_node("Identity", "id", nullptr, {relu->outputs[0]}, {"y"});
  ASSERT_TRUE(g.mark_output(id->outputs[0]).is_ok());
  // x -> identity -> z: a graph input cannot take an output's name; refused with the reason.
  Node* id2 = *g.add_node("Identity", "id2", nullptr, {x}, {"z"});
  ASSERT_TRUE(g.mark_output(id2->outputs[0]).is_ok());
  OptimizerReport report;
  ASSERT_TRUE(run_passes(g, PassOptions{}, &report).is_ok());
  EXPECT_EQ(g.outputs()[0]->name, "y");
  EXPECT_EQ(g.outputs()[0]->producer, relu);
  EXPECT_EQ(g.outputs()[1]->name, "z");
  ASSERT_EQ(pass_test::refused_by(report, "no-op-removal").size(), 1u);
  EXPECT_NE(pass_test::refused_by(report, "no-op-removal")[0].find("'id2'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
