#include <gtest/gtest.h>

#include "graph/graph.h"
#include "ops/activation/activation.h"

namespace kiln {
namespace {

std::unique_ptr<Attrs> relu() { return std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kRelu)); }

TEST(GraphLookup, FollowsRenamesAndRemovals) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2});
  Node* a = *g.add_node("Activation", "a", relu(), {x}, {"ya"});
  Node* b = *g.add_node("Activation", "b", relu(), {a->outputs[0]}, {"yb"});
  Node* dead = *g.add_node("Activation", "dead", relu(), {x}, {"yd"});
  (void)dead;
  ASSERT_TRUE(g.mark_output(b->outputs[0]).is_ok());
  EXPECT_EQ(g.find_value("ya"), a->outputs[0]);
  EXPECT_EQ(g.find_node("b"), b);
  ASSERT_TRUE(g.rename_value(a->outputs[0], "renamed").is_ok());
  EXPECT_EQ(g.find_value("ya"), nullptr);
  EXPECT_EQ(g.find_value("renamed"), a->outputs[0]);
  EXPECT_FALSE(g.rename_value(a->outputs[0], "x").is_ok());
  ASSERT_TRUE(g.rename_node(b, "b2").is_ok());
  EXPECT_EQ(g.find_node("b"), nullptr);
  EXPECT_EQ(g.find_node("b2"), b);
  g.remove_dead_nodes();
  EXPECT_EQ(g.find_node("dead"), nullptr);
  EXPECT_EQ(g.find_value("yd"), nullptr);
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_TRUE(x->uses.size() == 1 && x->uses[0].node == a);
  // The freed names can be taken again.
  EXPECT_TRUE(g.add_node("Activation", "dead", relu(), {x}, {"yd"}).is_ok());
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
}

TEST(GraphLookup, LongChainsBuildInLinearTime) {
  Graph g;
  Value* v = *g.add_input("x", DataType::kFloat32, {4});
  for (int i = 0; i < 50000; ++i) v = (*g.add_node("Activation", "r" + std::to_string(i), relu(), {v}))->outputs[0];
  ASSERT_TRUE(g.mark_output(v).is_ok());
  g.remove_dead_nodes();
  EXPECT_EQ(g.nodes().size(), 50000u);
  EXPECT_NE(g.find_node("r49999"), nullptr);
}

}  // namespace
}  // namespace kiln
