#pragma once
// The optimizer's passes, each made by a function in the file of its family (cleanup.cpp, ...).
#include <vector>

#include "passes/pass.h"

namespace kiln {

Pass constant_folding_pass();
Pass dead_code_pass();
Pass common_subexpression_pass();
Pass no_op_removal_pass();

// Patterns of several ops (layernorm_pattern.cpp, attention.cpp, pointwise_chain.cpp).
Pass layernorm_pattern_pass();
Pass attention_pass();
Pass attention_heads_pass();
/// Runs after every other fusion (it would take the pointwise nodes they fuse into their layers).
Pass pointwise_chain_pass();

// conv_fusions.cpp
Pass batchnorm_folding_pass();
Pass conv_scale_pass();
Pass conv_elementwise_sum_pass();
Pass conv_activation_pass();

// The seed's catalog beyond convolution and GEMM (seed_fusions.cpp).
Pass shuffle_shuffle_pass();
Pass shuffle_reduce_pass();
Pass reduce_pooling_pass();
Pass reduction_fusions_pass();
Pass scale_activation_pass();

// GEMM fusions (gelu_pattern.cpp, gemm_fusions.cpp, mlp_fusion.cpp).
Pass gelu_pattern_pass();
Pass batchnorm_folding_gemm_pass();
Pass gemm_bias_pass();
Pass gemm_elementwise_sum_pass();
Pass gemm_activation_pass();
Pass mlp_pass();

// Precision (precision.cpp): after the fusions, so fused layers are lowered whole.
Pass precision_pass();

// Layout (layout_blocked.cpp, layout_nhwc.cpp): after the precision pass, so the layers they convert are final;
// blocks first, NHWC for the convolutions blocks do not take.
Pass layout_blocked_pass();
Pass layout_nhwc_pass();
Pass matmul_weights_nk_pass();

/// Every pass in the order they run (pass_manager.cpp keeps one copy).
std::vector<Pass> all_optimizer_passes();

}  // namespace kiln
