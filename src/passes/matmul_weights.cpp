// matmul-weights-nk: a MatrixMultiply whose b is a constant [K, N] matrix read by it alone stores b as its transpose
// [N, K] with transpose_b set, once at build time (the CPU builder asks for it). oneDNN's AVX2 GEMM reads a
// transposed b far faster for a batch of rows against wide weights: BERT-base's [128, 768] x [768, 3072] took 8.8 ms
// with b as [K, N] and 4.6 ms as [N, K] on 2 EPYC cores (the [768, 768] and [3072, 768] ones 7-15% less).
#include <algorithm>
#include <utility>

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
        b->uses.size() != 1 || is_graph_output(g, b) || b->dims[0] < 2 || b->dims[1] < 2)
      continue;
    // b is read by this layer alone: it becomes its own transpose in place, so the [K, N] original is freed now,
    // not when the pass ends (BERT-base held its 340 MB of GEMM weights twice during the pass).
    auto saved = n->attrs->clone();
    attrs.transpose_b = true;
    KILN_ASSIGN_OR_RETURN(Tensor t, transposed(b->constant));
    Tensor kn = std::exchange(b->constant, std::move(t));
    const Dims kn_dims = std::exchange(b->dims, Dims{b->dims[1], b->dims[0]});
    std::reverse(b->dim_names.begin(), b->dim_names.end());
    if (Status st = ctx.backend_accepts(*n); !st.is_ok()) {  // keep what the backend runs
      n->attrs = std::move(saved);
      b->constant = std::move(kn);
      b->dims = kn_dims;
      std::reverse(b->dim_names.begin(), b->dim_names.end());
      ctx.refused(str_cat("'", n->name, "': b as [N, K]: ", st.message()));
      continue;
    }
    kn = Tensor();
    KILN_RETURN_IF_ERROR(g.rename_value(b, free_name(g, b->name + "/nk")));
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
