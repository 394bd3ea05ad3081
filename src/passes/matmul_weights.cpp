// matmul-weights-nk: a MatrixMultiply whose b is a constant [K, N] matrix read by it alone stores b as its transpose
// [N, K] with transpose_b set, once at build time (the CPU builder asks for it). oneDNN's AVX2 GEMM reads a
// transposed b far faster for a batch of rows against wide weights: BERT-base's [128, 768] x [768, 3072] took 8.8 ms
// with b as [K, N] and 4.6 ms as [N, K] on 2 EPYC cores (the [768, 768] and [3072, 768] ones 7-15% less).
#include <algorithm>

#include "ops/matmul/matmul.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// The [K, N] matrix `t` as [N, K].
Result<Tensor> transposed(const Tensor& t) {
  const int64_t k = t.dims()[0], n = t.dims()[1];
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(t.dtype(), Dims{n, k}));
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  constexpr int64_t kBlock = 32;  // blocks of the matrix keep both sides in cache
  for (int64_t r0 = 0; r0 < k; r0 += kBlock)
    for (int64_t c0 = 0; c0 < n; c0 += kBlock)
      for (int64_t r = r0; r < std::min(k, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(n, c0 + kBlock); ++c) dst[c * k + r] = src[r * n + c];
  return out;
}

Status matmul_weights_nk(PassContext& ctx) {
  if (!ctx.layout().matmul_weights_nk) return Status::ok();
  Graph& g = ctx.graph();
  int changed = 0;
  for (Node* n : g.nodes()) {
    if (n->op() != "MatrixMultiply" || n->inputs.size() < 2 || !n->inputs[1]) continue;
    auto& attrs = static_cast<MatrixMultiplyAttrs&>(*n->attrs);
    Value* b = n->inputs[1];
    if (attrs.transpose_b || !b->is_constant() || b->dtype != DataType::kFloat32 || b->dims.rank() != 2 ||
        b->uses.size() != 1 || b->dims[0] < 2 || b->dims[1] < 2)
      continue;
    auto saved = n->attrs->clone();
    attrs.transpose_b = true;
    KILN_ASSIGN_OR_RETURN(Tensor t, transposed(b->constant));
    KILN_ASSIGN_OR_RETURN(Value * nk, g.add_constant(free_name(g, b->name + "/nk"), std::move(t)));
    KILN_RETURN_IF_ERROR(g.set_input(n, 1, nk));
    if (Status st = ctx.backend_accepts(*n); !st.is_ok()) {  // keep what the backend runs
      n->attrs = std::move(saved);
      KILN_RETURN_IF_ERROR(g.set_input(n, 1, b));
      ctx.refused(str_cat("'", n->name, "': b as [N, K]: ", st.message()));
      continue;
    }
    ++changed;
  }
  if (changed > 0) ctx.applied(str_cat(changed, " MatrixMultiply layers read constant weights as [N, K]"));
  return Status::ok();
}

}  // namespace

Pass matmul_weights_nk_pass() {
  return {"matmul-weights-nk",
          "stores a MatrixMultiply's constant [K, N] weights as [N, K] (transpose_b) where the backend reads them "
          "faster so (CPU builds)",
          matmul_weights_nk};
}

}  // namespace kiln
