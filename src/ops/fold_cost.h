#pragma once
// Cost estimates for constant folding: the element operations an op's reference kernel takes on given
// inputs, so the importer can leave a node to run time instead of computing it for hours.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/schema.h"

namespace kiln {

/// Estimated element operations on these inputs (nullptr where an input is absent) giving `outputs`.
using FoldCostFn = std::function<double(const Attrs& attrs, const std::vector<const Tensor*>& inputs,
                                        const std::vector<TensorDesc>& outputs)>;

/// Registers the cost of op `op` (ops whose work is not linear in their sizes: MatMul, Einsum, DFT...).
bool register_fold_cost(std::string op, FoldCostFn cost);
/// The op's estimate, or the element count of its inputs and outputs when it registered none.
double fold_cost(const OpSchema& schema, const Attrs& attrs, const std::vector<const Tensor*>& inputs,
                 const std::vector<TensorDesc>& outputs);
/// The element count of the static outputs, in double so that absurd shapes do not overflow.
double output_elements(const std::vector<TensorDesc>& outputs);

#define KILN_REGISTER_FOLD_COST(op, ...) \
  static const bool KILN_CONCAT(kiln_fold_cost_registered_, __LINE__) = ::kiln::register_fold_cost(op, __VA_ARGS__)

}  // namespace kiln
