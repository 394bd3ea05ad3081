#include "train/autograd.h"

#include <gtest/gtest.h>

#include "runner/graph_runner.h"

namespace kiln::train {
namespace {

Tensor filled(Dims dims, std::vector<float> v) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

TEST(Autograd, IdentityChainPassesTheSeedToTheParameter) {
  Graph g;
  Value* p = g.add_constant("p", filled({1}, {3.f})).value();
  Node* a = g.add_node("Identity", "a", OpRegistry::global().find("Identity")->make_attrs(), {p}).value();
  g.add_node("Identity", "b", OpRegistry::global().find("Identity")->make_attrs(), {a->outputs[0]}, {"loss"}).value();
  AutogradOptions options;
  options.params = {"p"};
  auto tg = build_training_graph(g, "loss", options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();
  ASSERT_EQ(tg->params, std::vector<std::string>{"p"});
  ASSERT_EQ(tg->grads, std::vector<std::string>{"p.grad"});
  ASSERT_TRUE(tg->initial.count("p"));
  auto runner = GraphRunner::compile_reference(*tg->graph);
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  ASSERT_TRUE(runner->set_input("p", tg->initial["p"]).is_ok());
  ASSERT_TRUE(runner->run().is_ok());
  EXPECT_EQ(runner->output("loss")->at(0), 3.0);
  EXPECT_EQ(runner->output("p.grad")->at(0), 1.0);
}

TEST(Autograd, ErrorsNameTheProblem) {
  Graph g;
  Value* p = g.add_constant("p", filled({2, 2}, {1, 2, 3, 4})).value();
  Value* q = g.add_input("q", DataType::kFloat32, Dims{2, 2}).value();
  g.add_node("Det", "det", OpRegistry::global().find("Det")->make_attrs(), {p}, {"det"}).value();
  g.add_node("Identity", "id", OpRegistry::global().find("Identity")->make_attrs(), {q}, {"wide"}).value();
  auto no_rule = build_training_graph(g, "det");
  ASSERT_FALSE(no_rule.is_ok());
  EXPECT_NE(no_rule.status().to_string().find("'det' (op Det) has no gradient rule"), std::string::npos)
      << no_rule.status().to_string();
  auto not_scalar = build_training_graph(g, "wide");
  ASSERT_FALSE(not_scalar.is_ok());
  EXPECT_NE(not_scalar.status().message().find("must be one floating-point number"), std::string::npos);
  auto missing = build_training_graph(g, "nothing");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'nothing' is not a value"), std::string::npos);
}

}  // namespace
}  // namespace kiln::train
