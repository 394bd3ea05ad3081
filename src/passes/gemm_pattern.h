#pragma once
// What the GEMM fusions (gemm_fusions.cpp, mlp_fusion.cpp) read and write on MatrixMultiply and FullyConnected
// nodes: their bias (`c` / `bias`), their epilogue (residual input, fused activation) and their weights.
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/matmul/matmul.h"

namespace kiln {

/// MatrixMultiply or FullyConnected.
bool is_gemm(const Node* n);
/// Input `i` of `n`, or nullptr when absent.
Value* gemm_input(const Node& n, int i);
/// The fused activation in a gemm's attributes.
const FusedActivation& gemm_activation(const Node& n);
FusedActivation& gemm_activation(const Node& n, Attrs& attrs);
/// Whether the gemm has a residual or a fused activation already.
bool has_epilogue(const Node& n);
/// The gemm's output dims' last entry (the columns), or -1 when unknown.
int64_t gemm_columns(const Node& n);
/// Whether `v` has `n` elements laid along the last axis only: [n] or [1, ..., 1, n].
bool along_last_axis(const Value& v, int64_t n);
/// `inputs` without trailing absent entries.
std::vector<Value*> trimmed(std::vector<Value*> inputs);

}  // namespace kiln
