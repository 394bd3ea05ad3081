// Gradient rules of the data-movement ops and Identity against finite differences.
#include "ops/shuffle/shuffle.h"
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

TEST(ShuffleGrad, TransposeReshapeTranspose) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  ShuffleAttrs a;
  a.first_transpose = {2, 0, 1};  // [4, 2, 3]
  a.has_reshape_dims = true;
  a.reshape_dims = {4, 6};
  a.second_transpose = {1, 0};  // [6, 4]
  check_grads(m, m.node("Shuffle", attrs_of(a), {x}));
}

TEST(ShuffleGrad, ReshapeFromShapeInput) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  Value* shape = m.ints("shape", {0, -1});
  check_grads(m, m.node("Shuffle", attrs_of(ShuffleAttrs{}), {x, shape}));
}

TEST(ShuffleGrad, ConcatenationAndSplit) {
  GradModel m;
  Value* a = m.param("a", {2, 1, 3});
  Value* b = m.param("b", {2, 4, 3});
  ConcatenationAttrs c;
  c.axis = -2;
  Value* cat = m.node("Concatenation", attrs_of(c), {a, b});
  SplitAttrs s;
  s.axis = 1;
  s.split = {2, 1, 2};
  Node* split = m.node_all("Split", attrs_of(s), {cat});
  ASSERT_NE(split, nullptr);
  // Outputs 0 and 2 are used; no gradient reaches output 1.
  Value* y =
      m.node("ElementWise", attrs_of(elementwise_attrs(ElementWiseOp::kProd)), {split->outputs[0], split->outputs[2]});
  check_grads(m, y);
}

TEST(ShuffleGrad, Slices) {
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{1, 0}, {3, 2}, {0, 2}, {1, 1}},        // plain
      {{0}, {7}, {1}, {2}},                    // stride 2, ends on an element
      {{1}, {7}, {1}, {3}},                    // stride 3, the last zeros overhang
      {{-1, 6}, {-100, 0}, {0, 1}, {-1, -2}},  // backwards
      {{5, 2}, {1, 100}, {1, 2}, {-3, 2}},     // backwards strided, forwards strided
  };
  for (const Case& c : cases) {
    GradModel m;
    Value* x = m.param("x", {3, 7, 4});
    Value* y = m.node(
        "Slice", std::make_unique<NoAttrs>(),
        {x, m.ints("starts", c.starts), m.ints("ends", c.ends), m.ints("axes", c.axes), m.ints("steps", c.steps)});
    check_grads(m, y);
  }
}

TEST(ShuffleGrad, ConstantPadding) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  Value* v = m.param("value", {1});
  // Pads axis 1 by (1, 2), crops axis 2 by (-1, 0) and pads it after by 0... as (begin, end) per axis.
  Value* pads = m.ints("pads", {0, 1, -1, 0, 2, 1});
  PaddingAttrs a;
  check_grads(m, m.node("Padding", attrs_of(a), {x, pads, v}));
}

TEST(ShuffleGrad, ReflectEdgeWrapPadding) {
  for (PadMode mode : {PadMode::kReflect, PadMode::kEdge, PadMode::kWrap}) {
    SCOPED_TRACE(enum_name(mode));
    GradModel m;
    Value* x = m.param("x", {2, 3, 4});
    Value* pads = m.ints("pads", {0, 2, -1, 1, 1, 5});  // axis 2 wraps past its size in wrap mode
    PaddingAttrs a;
    a.mode = mode;
    check_grads(m, m.node("Padding", attrs_of(a), {x, pads}));
  }
}

TEST(ShuffleGrad, ExpandTileIdentity) {
  {
    GradModel m;
    Value* x = m.param("x", {3, 1});
    check_grads(m, m.node("Expand", std::make_unique<NoAttrs>(), {x, m.ints("shape", {2, 3, 4})}));
  }
  {
    GradModel m;
    Value* x = m.param("x", {2, 1, 3});
    check_grads(m, m.node("Tile", std::make_unique<NoAttrs>(), {x, m.ints("repeats", {2, 3, 1})}));
  }
  {
    GradModel m;
    Value* x = m.param("x", {2, 3});
    Value* i = m.node("Identity", std::make_unique<NoAttrs>(), {x});
    check_grads(m, m.node("ElementWise", attrs_of(elementwise_attrs(ElementWiseOp::kProd)), {i, x}));
  }
}

}  // namespace
}  // namespace kiln::train::grad_check
