// Gradient rules of the linear ops CumSum, Trilu and ReverseSequence against finite differences.
#include "ops/cumsum/cumsum.h"
#include "ops/einsum/einsum.h"
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

TEST(LinearGrad, Einsum) {
  struct Case {
    std::string equation;
    std::vector<Dims> dims;
  };
  const Case cases[] = {
      {"ij,jk->ik", {{2, 3}, {3, 4}}},
      {"ij,jk", {{2, 3}, {3, 4}}},                           // implicit output
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},     // attention scores
      {"...ij,...jk->...ik", {{2, 3, 2, 3}, {2, 3, 3, 2}}},  // ellipsis
      {"...ij,jk->...ik", {{2, 2, 3}, {3, 2}}},
      {"...ij,...jk->...ik",
       {{2, 1, 2, 3}, {3, 3, 2}}},     // ellipsis axes broadcast              // ellipsis in one operand
      {"ij,ik->i", {{3, 2}, {3, 4}}},  // j and k summed inside one operand each
      {"ij->ji", {{2, 3}}},
      {"ii", {{3, 3}}},                     // trace
      {"...ii->...i", {{2, 3, 3}}},         // batch diagonal
      {"iji,jk->ik", {{3, 2, 3}, {2, 2}}},  // a diagonal across non-adjacent axes
      {"i,i,i->", {{4}, {4}, {4}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    GradModel m;
    std::vector<Value*> ins;
    for (size_t i = 0; i < c.dims.size(); ++i) ins.push_back(m.param("x" + std::to_string(i), c.dims[i]));
    EinsumAttrs a;
    a.equation = c.equation;
    check_grads(m, m.node("Einsum", attrs_of(a), ins));
  }
}

}  // namespace
}  // namespace kiln::train::grad_check
