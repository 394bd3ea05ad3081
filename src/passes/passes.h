#pragma once
// The optimizer's passes, each made by a function in the file of its family (cleanup.cpp, ...).
#include <vector>

#include "passes/pass.h"

namespace kiln {

Pass constant_folding_pass();
Pass dead_code_pass();
Pass common_subexpression_pass();
Pass no_op_removal_pass();
Pass layernorm_pattern_pass();
Pass attention_pass();
/// Runs after every other fusion (it would take the pointwise nodes they fuse into their layers).
Pass pointwise_chain_pass();

/// Every pass in the order they run (pass_manager.cpp keeps one copy).
std::vector<Pass> all_optimizer_passes();

}  // namespace kiln
