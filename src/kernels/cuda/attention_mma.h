#pragma once
// Tactic "mma" of cuda.attention: flash attention with scores, probabilities and output in registers (mma.sync;
// float16 and bfloat16, D = Dv of 32, 64 or 128). See attention_mma.cu.
#include "kernels/registry.h"

namespace kiln::cuda {

/// Whether the mma tactic takes this problem (dtype, head dims, shared memory of the current device), or why not.
Status attention_mma_fits(const OpCall& call);

/// Whether q, k, v and the output of `ctx` are 16-byte aligned, as the mma kernel copies and stores them.
bool attention_mma_aligned(const KernelContext& ctx);

/// Runs the Attention of `ctx` with the mma kernel on its stream.
Status run_attention_mma(KernelContext& ctx);

}  // namespace kiln::cuda
