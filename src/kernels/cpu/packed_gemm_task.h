#pragma once
// What packed_gemm.cpp's two register paths share (AVX2: tiles of 6 x 16; AVX-512: 8 x 32, packed_gemm_wide.cpp):
// the split of the product into tasks of (a block of A's rows, a group of B's panels), where A comes from, and the
// activations applied to a stored tile.
#include <cstdint>

#include "kernels/cpu/packed_gemm.h"

namespace kiln::cpu::gemm_detail {

constexpr int64_t kDepth = 384;         // K rows per block: a strip of A's rows (9-12 KB) stays in L1 across panels
constexpr int64_t kMaxBlockRows = 72;   // A rows per task
constexpr int64_t kMaxGroupPanels = 8;  // panels per task: their K block is 192 KB, within a core's L2
constexpr int64_t kTasksPerThread = 8;  // enough tasks for parallel_for to deal out in pieces
constexpr int64_t kWideStripRows = 8, kWideStripPanels = 2;  // the AVX-512 kernel's tile

struct Plan {
  int64_t block_rows, row_blocks, group_panels, groups;
};

/// Blocks of whole strips of `strip_rows`; groups of panels halved (not below `min_group_panels`) until each
/// thread has kTasksPerThread tasks.
Plan plan(int64_t m, int64_t panels, int64_t strip_rows, int64_t min_group_panels);

/// A in place (a, rows lda apart) or from gather.
struct Source {
  const float* a = nullptr;
  int64_t lda = 0;
  const RowGather* gather = nullptr;
};

/// ReLU and Clip, applied in registers as a tile is stored; the others run on the stored floats (activate_span).
bool inline_activation(const FusedActivation& f);
void activate_span(const FusedActivation& f, float* y, int64_t n);

/// One task of the plan on the AVX-512 kernel (packed_gemm_wide.cpp).
void run_wide_task(int64_t m, const Source& src, const PackedColumns& b, float* c, int64_t ldc, const GemmEpilogue& e,
                   const Plan& p, int64_t task);

}  // namespace kiln::cpu::gemm_detail
