// Gradient rules of ElementWise (with broadcasting), Unary, Scale, Where and Cast against finite
// differences.
#include "ops/scale/scale.h"
#include "ops/unary/unary.h"
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

Value* binary(GradModel& m, ElementWiseOp op, Value* a, Value* b) {
  return m.node("ElementWise", attrs_of(elementwise_attrs(op, op == ElementWiseOp::kMod)), {a, b});
}

TEST(ElementWiseGrad, ArithmeticBroadcastsChannels) {  // [N, C, H, W] (op) [C, 1, 1]
  const ElementWiseOp ops[] = {ElementWiseOp::kSum, ElementWiseOp::kSub, ElementWiseOp::kProd, ElementWiseOp::kDiv};
  for (ElementWiseOp op : ops) {
    SCOPED_TRACE(enum_name(op));
    GradModel m;
    Value* a = m.param("a", {2, 3, 2, 2});
    Value* b = m.param("b", {3, 1, 1}, 0.5, 1.5);
    check_grads(m, binary(m, op, a, b));
  }
}

TEST(ElementWiseGrad, BroadcastsTheFirstOperand) {  // [3, 1] (op) [2, 3, 4]
  const ElementWiseOp ops[] = {ElementWiseOp::kSub, ElementWiseOp::kDiv, ElementWiseOp::kProd};
  for (ElementWiseOp op : ops) {
    SCOPED_TRACE(enum_name(op));
    GradModel m;
    Value* a = m.param("a", {3, 1}, 0.5, 1.5);
    Value* b = m.param("b", {2, 3, 4}, 0.5, 1.5);
    check_grads(m, binary(m, op, a, b));
  }
}

TEST(ElementWiseGrad, MaxMinGoToTheWinner) {
  for (ElementWiseOp op : {ElementWiseOp::kMax, ElementWiseOp::kMin}) {
    SCOPED_TRACE(enum_name(op));
    GradModel m;
    Value* a = m.param("a", {2, 3, 4});
    Value* b = m.param("b", {3, 4});
    check_grads(m, binary(m, op, a, b));
  }
}

TEST(ElementWiseGrad, MaxTieGoesToA) {
  GradModel m;
  Value* a = m.param_values("a", {3}, {1.f, 2.f, 3.f});
  Value* b = m.param_values("b", {3}, {1.f, 5.f, 0.f});
  add_loss(m, binary(m, ElementWiseOp::kMax, a, b), {1.0, 1.0, 1.0});
  auto g = autograd(m);
  EXPECT_EQ(g["a"], (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(g["b"], (std::vector<double>{0, 1, 0}));
}

TEST(ElementWiseGrad, PowBothOperands) {
  GradModel m;
  Value* a = m.param("a", {2, 3}, 0.5, 2.0);
  Value* b = m.param("b", {3}, -1.5, 2.5);
  check_grads(m, binary(m, ElementWiseOp::kPow, a, b));
}

TEST(ElementWiseGrad, PowIntegerExponent) {
  GradModel m;
  Value* a = m.param("a", {2, 3}, -2.0, 2.0);
  Value* b = m.constant("e", DataType::kInt64, {}, {3});
  check_grads(m, binary(m, ElementWiseOp::kPow, a, b));
}

TEST(ElementWiseGrad, Fmod) {
  GradModel m;
  Value* a = m.param_values("a", {4}, {5.3f, -5.3f, 2.2f, 7.9f});
  Value* b = m.param_values("b", {4}, {2.1f, 2.1f, -1.3f, 3.7f});
  check_grads(m, binary(m, ElementWiseOp::kMod, a, b));
}

TEST(UnaryGrad, EveryDifferentiableOp) {
  struct Case {
    UnaryOp op;
    double lo, hi;
  };
  const Case cases[] = {
      {UnaryOp::kExp, -1, 1},         {UnaryOp::kLog, 0.5, 2},     {UnaryOp::kSqrt, 0.5, 2},
      {UnaryOp::kReciprocal, 0.5, 2}, {UnaryOp::kAbs, -1, 1},      {UnaryOp::kNeg, -1, 1},
      {UnaryOp::kErf, -1, 1},         {UnaryOp::kSin, -2, 2},      {UnaryOp::kCos, -2, 2},
      {UnaryOp::kTan, -1, 1},         {UnaryOp::kAsin, -0.8, 0.8}, {UnaryOp::kAcos, -0.8, 0.8},
      {UnaryOp::kAtan, -2, 2},        {UnaryOp::kSinh, -1, 1},     {UnaryOp::kCosh, -1, 1},
      {UnaryOp::kAsinh, -2, 2},       {UnaryOp::kAcosh, 1.5, 3},   {UnaryOp::kAtanh, -0.7, 0.7},
      {UnaryOp::kFloor, -2, 2},       {UnaryOp::kCeil, -2, 2},     {UnaryOp::kRound, -2, 2},
      {UnaryOp::kSign, -2, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(enum_name(c.op));
    GradModel m;
    Value* x = m.param("x", {2, 5}, c.lo, c.hi);
    // Keep x away from the jumps of floor/ceil/round/sign and from 0 for abs.
    if (c.op == UnaryOp::kFloor || c.op == UnaryOp::kCeil || c.op == UnaryOp::kRound || c.op == UnaryOp::kSign ||
        c.op == UnaryOp::kAbs)
      for (int i = 0; i < 10; ++i) m.values["x"].data<float>()[i] = -1.7f + 0.37f * static_cast<float>(i);
    check_grads(m, m.node("Unary", attrs_of(unary_attrs(c.op)), {x}));
  }
}

TEST(ScaleGrad, ChannelShiftScalePower) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 2}, 0.5, 1.5);
  Value* shift = m.param("shift", {3}, 0.2, 0.5);
  Value* scale = m.param("scale", {3}, 0.5, 1.5);
  Value* power = m.param("power", {3}, 1.0, 2.0);
  ScaleAttrs a;
  a.mode = ScaleMode::kChannel;
  a.channel_axis = 1;
  check_grads(m, m.node("Scale", attrs_of(a), {x, shift, scale, power}));
}

TEST(ScaleGrad, UniformAndElementwise) {
  {
    GradModel m;
    Value* x = m.param("x", {2, 3});
    Value* scale = m.param("scale", {1});
    ScaleAttrs a;
    check_grads(m, m.node("Scale", attrs_of(a), {x, nullptr, scale}));
  }
  {
    GradModel m;
    Value* x = m.param("x", {2, 3, 2});
    Value* shift = m.param("shift", {6});
    Value* scale = m.param("scale", {3, 2});
    ScaleAttrs a;
    a.mode = ScaleMode::kElementwise;
    a.channel_axis = 1;
    check_grads(m, m.node("Scale", attrs_of(a), {x, shift, scale}));
  }
}

TEST(WhereGrad, SplitsByTheCondition) {
  GradModel m;
  Value* c = m.constant("c", DataType::kBool, {2, 1, 3}, {1, 0, 1, 0, 0, 1});
  Value* x = m.param("x", {2, 4, 3});
  Value* y = m.param("y", {4, 1});
  check_grads(m, m.node("Where", std::make_unique<NoAttrs>(), {c, x, y}));
}

TEST(CastGrad, FloatRoundTrip) {
  GradModel m;
  Value* x = m.param("x", {2, 3});
  Value* h = m.node("Cast", attrs_of(cast_to(DataType::kFloat16)), {x});
  Value* y = m.node("Cast", attrs_of(cast_to(DataType::kFloat32)), {h});
  CheckOptions o;
  o.atol = 2e-2;  // float16 rounding of the forward values
  o.h = 5e-2;
  check_grads(m, y, o);
}

}  // namespace
}  // namespace kiln::train::grad_check
