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
      // Convolution (before scale-activation, so conv-scale sees the scale alone); conv-elementwise-sum before
      // conv-activation, so conv + add + relu becomes one layer.
      batchnorm_folding_pass(),
      conv_scale_pass(),
      conv_elementwise_sum_pass(),
      conv_activation_pass(),
      shuffle_shuffle_pass(),
      shuffle_reduce_pass(),
      reduce_pooling_pass(),
      reduction_fusions_pass(),
      scale_activation_pass(),
      // GEMM fusions (gelu_pattern.cpp, gemm_fusions.cpp, mlp_fusion.cpp)
      gelu_pattern_pass(),
      batchnorm_folding_gemm_pass(),
      gemm_bias_pass(),
      gemm_elementwise_sum_pass(),
      gemm_activation_pass(),
      mlp_pass(),
      precision_pass(),
      // Cleanup after the fusions.
      dead_code_pass(),
  };
}

}  // namespace kiln
