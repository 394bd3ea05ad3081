#include "passes/gemm_pattern.h"

namespace kiln {

bool is_gemm(const Node* n) { return n && (n->op() == "MatrixMultiply" || n->op() == "FullyConnected"); }

Value* gemm_input(const Node& n, int i) { return i < static_cast<int>(n.inputs.size()) ? n.inputs[i] : nullptr; }

const FusedActivation& gemm_activation(const Node& n) { return gemm_activation(n, *n.attrs); }

FusedActivation& gemm_activation(const Node& n, Attrs& attrs) {
  return n.op() == "MatrixMultiply" ? static_cast<MatrixMultiplyAttrs&>(attrs).fused
                                    : static_cast<FullyConnectedAttrs&>(attrs).fused;
}

bool has_epilogue(const Node& n) { return gemm_activation(n).on || gemm_input(n, kGemmResidualInput); }

int64_t gemm_columns(const Node& n) {
  const Dims& d = n.outputs[0]->dims;
  return d.rank() ? d[d.rank() - 1] : -1;
}

bool along_last_axis(const Value& v, int64_t n) {
  if (n < 0 || v.dims.rank() < 1 || v.dims[v.dims.rank() - 1] != n) return false;
  for (int i = 0; i + 1 < v.dims.rank(); ++i)
    if (v.dims[i] != 1) return false;
  return true;
}

std::vector<Value*> trimmed(std::vector<Value*> inputs) {
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  return inputs;
}

}  // namespace kiln
