// Gradient rules of the linear ops CumSum, Trilu and ReverseSequence against finite differences.
#include "ops/cumsum/cumsum.h"
#include "ops/reverse_sequence/reverse_sequence.h"
#include "ops/trilu/trilu.h"
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

TEST(LinearGrad, CumSumEveryMode) {
  for (int mode = 0; mode < 4; ++mode) {
    SCOPED_TRACE(mode);
    GradModel m;
    Value* x = m.param("x", {2, 5});
    Value* axis = m.constant("axis", DataType::kInt64, {}, {1});
    CumSumAttrs a;
    a.exclusive = mode & 1;
    a.reverse = mode & 2;
    check_grads(m, m.node("CumSum", attrs_of(a), {x, axis}));
  }
}

TEST(LinearGrad, Trilu) {
  for (bool upper : {true, false}) {
    GradModel m;
    Value* x = m.param("x", {2, 3, 4});
    TriluAttrs a;
    a.upper = upper;
    check_grads(m, m.node("Trilu", attrs_of(a), {x, m.constant("k", DataType::kInt64, {}, {-1})}));
  }
}

TEST(LinearGrad, ReverseSequence) {
  GradModel m;
  Value* x = m.param("x", {4, 3, 2});  // [time, batch, ...]
  Value* lens = m.constant("lens", DataType::kInt64, {3}, {4, 1, 3});
  check_grads(m, m.node("ReverseSequence", attrs_of(ReverseSequenceAttrs{}), {x, lens}));
}

}  // namespace
}  // namespace kiln::train::grad_check
