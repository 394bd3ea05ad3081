#include "passes/passes.h"

namespace kiln {

std::vector<Pass> all_optimizer_passes() {
  // Cleanup first (fusions see the simplest graph), fusions in the order they depend on each other, cleanup
  // again for what the fusions left.
  return {
      constant_folding_pass(),
      no_op_removal_pass(),
      common_subexpression_pass(),
      dead_code_pass(),
      // Fusions.
      layernorm_pattern_pass(),
      attention_pass(),
      // Last among the fusions: it takes pointwise nodes the others would fuse into their layers.
      pointwise_chain_pass(),
  };
}

}  // namespace kiln
