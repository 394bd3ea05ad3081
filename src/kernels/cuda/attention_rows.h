#pragma once
// Tactic "rows" of cuda.attention: whole score rows in shared memory, both products on tensor cores (float16 and
// bfloat16, head dims multiples of 16 up to 128, Sk up to 512). See attention_rows.cu.
#include "kernels/registry.h"

namespace kiln::cuda {

/// Whether the rows tactic takes this problem (dtype, head dims, a static Sk, shared memory of the current
/// device), or why not.
Status attention_rows_fits(const OpCall& call);

/// Runs the Attention of `ctx` with the rows kernel on its stream.
Status run_attention_rows(KernelContext& ctx);

}  // namespace kiln::cuda
