// Gradient rules of MatrixMultiply and FullyConnected against finite differences.
#include "ops/matmul/matmul.h"
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

MatrixMultiplyAttrs mm(bool ta, bool tb, float alpha = 1.f, float beta = 1.f) {
  MatrixMultiplyAttrs a;
  a.transpose_a = ta;
  a.transpose_b = tb;
  a.alpha = alpha;
  a.beta = beta;
  return a;
}

TEST(MatmulGrad, BatchedTimesShared) {  // [B, M, K] x [K, N]
  GradModel m;
  Value* a = m.param("a", {2, 3, 4});
  Value* b = m.param("b", {4, 5});
  check_grads(m, m.node("MatrixMultiply", attrs_of(mm(false, false)), {a, b}));
}

TEST(MatmulGrad, BatchBroadcastBothWays) {  // [2, 1, 3, 4] x [3, 4, 2]
  GradModel m;
  Value* a = m.param("a", {2, 1, 3, 4});
  Value* b = m.param("b", {3, 4, 2});
  check_grads(m, m.node("MatrixMultiply", attrs_of(mm(false, false)), {a, b}));
}

TEST(MatmulGrad, Transposes) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(testing::Message() << "transpose_a " << ta << " transpose_b " << tb);
    GradModel m;
    Value* a = m.param("a", ta ? Dims{2, 4, 3} : Dims{2, 3, 4});
    Value* b = m.param("b", tb ? Dims{5, 4} : Dims{4, 5});
    check_grads(m, m.node("MatrixMultiply", attrs_of(mm(ta, tb, 0.5f)), {a, b}));
  }
}

TEST(MatmulGrad, TransposedBatchedOperands) {
  GradModel m;
  Value* a = m.param("a", {1, 4, 3});
  Value* b = m.param("b", {2, 5, 4});
  check_grads(m, m.node("MatrixMultiply", attrs_of(mm(true, true)), {a, b}));
}

TEST(MatmulGrad, Vectors) {
  {
    GradModel m;  // [K] x [B, K, N]
    Value* a = m.param("a", {4});
    Value* b = m.param("b", {2, 4, 3});
    check_grads(m, m.node("MatrixMultiply", attrs_of(mm(false, false)), {a, b}));
  }
  {
    GradModel m;  // [M, K] x [K]
    Value* a = m.param("a", {3, 4});
    Value* b = m.param("b", {4});
    check_grads(m, m.node("MatrixMultiply", attrs_of(mm(false, false)), {a, b}));
  }
  {
    GradModel m;  // [K] x [K]: a scalar
    Value* a = m.param("a", {4});
    Value* b = m.param("b", {4});
    check_grads(m, m.node("MatrixMultiply", attrs_of(mm(false, false)), {a, b}));
  }
}

TEST(MatmulGrad, GemmBias) {
  GradModel m;
  Value* a = m.param("a", {4, 3});
  Value* b = m.param("b", {5, 4});
  Value* c = m.param("c", {5});
  check_grads(m, m.node("MatrixMultiply", attrs_of(mm(true, true, 0.5f, 2.f)), {a, b, c}));
}

TEST(MatmulGrad, FullyConnected) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  Value* w = m.param("w", {5, 12});
  Value* bias = m.param("bias", {5});
  FullyConnectedAttrs fc;
  fc.axis = 1;
  check_grads(m, m.node("FullyConnected", attrs_of(fc), {x, w, bias}));
}

TEST(MatmulGrad, FullyConnectedLastAxis) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  Value* w = m.param("w", {2, 4});
  FullyConnectedAttrs fc;
  fc.axis = -1;
  check_grads(m, m.node("FullyConnected", attrs_of(fc), {x, w}));
}

TEST(MatmulGrad, RefusesFusedActivation) {
  GradModel m;
  Value* a = m.param("a", {2, 3});
  Value* b = m.param("b", {3, 2});
  MatrixMultiplyAttrs attrs = mm(false, false);
  attrs.fused.on = true;
  attrs.fused.kind = ActivationKind::kRelu;
  add_loss(m, m.node("MatrixMultiply", attrs_of(attrs), {a, b}));
  AutogradOptions ao;
  ao.params = m.params;
  auto tg = build_training_graph(m.graph, "loss", ao);
  ASSERT_FALSE(tg.is_ok());
  EXPECT_NE(tg.status().to_string().find("fused activation"), std::string::npos) << tg.status().to_string();
}

}  // namespace
}  // namespace kiln::train::grad_check
