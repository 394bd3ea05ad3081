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
      // Fusions. Patterns of several ops first (layernorm, attention); convolution (conv-scale before
      // scale-activation sees the scale alone; conv-elementwise-sum before conv-activation, so conv + add + relu
      // becomes one layer); GEMM (gelu-pattern first, so gemm-activation takes the GELU); the seed's catalog;
      // pointwise-chain last (it would take the pointwise nodes the others fuse into their layers).
      layernorm_pattern_pass(),
      attention_pass(),
      batchnorm_folding_pass(),
      conv_scale_pass(),
      conv_elementwise_sum_pass(),
      conv_activation_pass(),
      gelu_pattern_pass(),
      batchnorm_folding_gemm_pass(),
      gemm_bias_pass(),
      gemm_elementwise_sum_pass(),
      gemm_activation_pass(),
      mlp_pass(),
      shuffle_shuffle_pass(),
      // After shuffle-shuffle has merged each projection's Reshape and Transpose into one Shuffle.
      attention_heads_pass(),
      shuffle_reduce_pass(),
      reduce_pooling_pass(),
      reduction_fusions_pass(),
      scale_activation_pass(),
      pointwise_chain_pass(),
      // Precision after the fusions, so fused layers are lowered whole.
      precision_pass(),
      // Layouts on the final layers: convolutions in channel blocks (CPU builds that ask for them), then
      // channels-last convolutions and pooling where the backend wants them.
      layout_blocked_pass(),
      layout_nhwc_pass(),
      // Constant MatMul weights as [N, K] where the backend reads them faster so (CPU builds).
      matmul_weights_nk_pass(),
      // Cleanup after the fusions.
      dead_code_pass(),
  };
}

}  // namespace kiln
