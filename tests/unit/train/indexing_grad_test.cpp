// Gradient rules of the gathers against finite differences: repeated indices accumulate.
#include "ops/indexing/indexing.h"
#include "tensor_grad_check.h"

namespace kiln::train::grad_check {
namespace {

TEST(IndexingGrad, EmbeddingLookupWithRepeats) {
  GradModel m;
  Value* table = m.param("table", {5, 3});
  Value* ids = m.constant("ids", DataType::kInt64, {2, 3}, {1, 4, 1, 0, -1, 1});
  check_grads(m, m.node("Gather", attrs_of(GatherAttrs{}), {table, ids}));
}

TEST(IndexingGrad, GatherInnerAxis) {
  GradModel m;
  Value* x = m.param("x", {2, 4, 3});
  Value* ids = m.constant("ids", DataType::kInt32, {3}, {3, 0, 3});
  GatherAttrs a;
  a.axis = 1;
  check_grads(m, m.node("Gather", attrs_of(a), {x, ids}));
}

TEST(IndexingGrad, GatherScalarIndex) {
  GradModel m;
  Value* x = m.param("x", {2, 4});
  Value* ids = m.constant("ids", DataType::kInt64, {}, {2});
  GatherAttrs a;
  a.axis = -1;
  check_grads(m, m.node("Gather", attrs_of(a), {x, ids}));
}

TEST(IndexingGrad, GatherElementsAndND) {
  {
    GradModel m;
    Value* x = m.param("x", {3, 4});
    Value* ids = m.constant("ids", DataType::kInt64, {2, 4}, {0, 2, 2, 1, 2, 2, 0, 0});
    GatherElementsAttrs a;
    a.axis = 0;
    check_grads(m, m.node("GatherElements", attrs_of(a), {x, ids}));
  }
  {
    GradModel m;
    Value* x = m.param("x", {3, 4, 2});
    Value* ids = m.constant("ids", DataType::kInt64, {3, 2}, {0, 1, 2, 3, 0, 1});
    check_grads(m, m.node("GatherND", attrs_of(GatherNDAttrs{}), {x, ids}));
  }
}

TEST(IndexingGrad, Scatters) {
  for (ScatterReduction r : {ScatterReduction::kNone, ScatterReduction::kAdd}) {
    SCOPED_TRACE(enum_name(r));
    {
      GradModel m;
      Value* data = m.param("data", {4, 3});
      Value* ids = m.constant("ids", DataType::kInt64, {3, 1}, {3, -4, 3});  // row 3 twice
      Value* upd = m.param("updates", {3, 3});
      ScatterNDAttrs a;
      a.reduction = r;
      check_grads(m, m.node("ScatterND", attrs_of(a), {data, ids, upd}));
    }
    {
      GradModel m;
      Value* data = m.param("data", {3, 4});
      // Row 2 writes column 3 twice: with none the second update wins and alone gets a gradient.
      Value* ids = m.constant("ids", DataType::kInt64, {3, 2}, {1, 3, 0, 2, 3, 3});
      Value* upd = m.param("updates", {3, 2});
      ScatterElementsAttrs a;
      a.axis = 1;
      a.reduction = r;
      check_grads(m, m.node("ScatterElements", attrs_of(a), {data, ids, upd}));
    }
  }
}

TEST(IndexingGrad, TopKValues) {
  GradModel m;
  Value* x = m.param("x", {3, 5});
  TopKAttrs a;
  a.axis = 1;
  check_grads(m, m.node("TopK", attrs_of(a), {x, m.ints("k", {2})}));
}

TEST(IndexingGrad, GatherNDBatchDims) {
  GradModel m;
  Value* x = m.param("x", {2, 3, 4});
  // batch_dims 1: per batch, two index tuples into [3, 4] (repeats accumulate).
  Value* ids = m.constant("ids", DataType::kInt32, {2, 2, 2}, {0, 1, 0, 1, 2, -1, 2, 3});
  GatherNDAttrs a;
  a.batch_dims = 1;
  check_grads(m, m.node("GatherND", attrs_of(a), {x, ids}));
}

}  // namespace
}  // namespace kiln::train::grad_check
