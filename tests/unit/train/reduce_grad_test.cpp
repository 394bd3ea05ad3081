// Gradient rules of Reduce against finite differences (ties and zeros checked exactly).
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

ReduceAttrs reduce(ReduceOp op, std::vector<int64_t> axes, bool keep) {
  ReduceAttrs a;
  a.op = op;
  a.axes = std::move(axes);
  a.keep_dims = keep;
  return a;
}

TEST(ReduceGrad, EveryOp) {
  const ReduceOp ops[] = {ReduceOp::kSum,       ReduceOp::kMean, ReduceOp::kMax,       ReduceOp::kMin,
                          ReduceOp::kL1,        ReduceOp::kL2,   ReduceOp::kSumSquare, ReduceOp::kLogSum,
                          ReduceOp::kLogSumExp, ReduceOp::kProd};
  for (ReduceOp op : ops) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(testing::Message() << enum_name(op) << " keep_dims " << keep);
      GradModel m;
      const bool positive = op == ReduceOp::kLogSum || op == ReduceOp::kL1;
      Value* x = m.param("x", {2, 3, 4}, positive ? 0.5 : -1.0, positive ? 1.5 : 1.0);
      check_grads(m, m.node("Reduce", attrs_of(reduce(op, {0, 2}, keep)), {x}));
    }
  }
}

TEST(ReduceGrad, AllAxesAndAxesInput) {
  {
    GradModel m;
    Value* x = m.param("x", {3, 4});
    check_grads(m, m.node("Reduce", attrs_of(reduce(ReduceOp::kLogSumExp, {}, false)), {x}));
  }
  {
    GradModel m;
    Value* x = m.param("x", {3, 4});
    Value* axes = m.ints("axes", {-1});
    check_grads(m, m.node("Reduce", attrs_of(reduce(ReduceOp::kMean, {}, false)), {x, axes}));
  }
}

TEST(ReduceGrad, MaxSplitsTies) {
  GradModel m;
  Value* x = m.param_values("x", {2, 3}, {1, 3, 3, -1, -2, -3});
  add_loss(m, m.node("Reduce", attrs_of(reduce(ReduceOp::kMax, {1}, false)), {x}), {2.0, 1.0});
  auto g = autograd(m);
  EXPECT_EQ(g["x"], (std::vector<double>{0, 1, 1, 1, 0, 0}));
}

TEST(ReduceGrad, ProdWithZeros) {
  GradModel m;  // rows: no zero, one zero, two zeros
  Value* x = m.param_values("x", {3, 3}, {2, 3, 4, 2, 0, 5, 0, 3, 0});
  add_loss(m, m.node("Reduce", attrs_of(reduce(ReduceOp::kProd, {1}, true)), {x}), {1.0, 1.0, 1.0});
  auto g = autograd(m);
  EXPECT_EQ(g["x"], (std::vector<double>{12, 8, 6, 0, 10, 0, 0, 0, 0}));
}

TEST(ReduceGrad, L2AtZeroIsZero) {
  GradModel m;
  Value* x = m.param_values("x", {2, 2}, {0, 0, 3, 4});
  add_loss(m, m.node("Reduce", attrs_of(reduce(ReduceOp::kL2, {1}, false)), {x}), {1.0, 1.0});
  auto g = autograd(m);
  ASSERT_EQ(g["x"].size(), 4u);
  EXPECT_EQ(g["x"][0], 0);
  EXPECT_EQ(g["x"][1], 0);
  EXPECT_NEAR(g["x"][2], 0.6, 1e-6);
  EXPECT_NEAR(g["x"][3], 0.8, 1e-6);
}

}  // namespace
}  // namespace kiln::train::grad_check
