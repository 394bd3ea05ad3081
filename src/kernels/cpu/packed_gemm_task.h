#pragma once
// What packed_gemm.cpp's two register paths share (AVX2: tiles of 6 x 16; AVX-512: 8 x 32, packed_gemm_wide.cpp):
// the split of the product into tasks of (a block of A's rows, a group of B's panels), where A comes from, and the
// activations applied to a stored tile.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/packed_gemm.h"

namespace kiln::cpu::gemm_detail {

constexpr int64_t kDepth = 384;          // K rows per block: a strip of A's rows (9-12 KB) stays in L1 across panels
constexpr int64_t kMaxBlockRows = 72;    // A rows per task
constexpr int64_t kMaxGroupPanels = 8;   // panels per task: their K block is 192 KB, within a core's L2
constexpr int64_t kTasksPerThread = 8;   // enough tasks for parallel_for to deal out in pieces
constexpr int64_t kGroupsPerThread = 2;  // groups per thread from which whole groups are dealt out
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

/// A task's share of the product: rows [r0, r0 + rows) of A and C against panels [panel0, panel1) of B.
struct TaskSpan {
  int64_t r0, rows, panel0, panel1;
};

inline TaskSpan task_span(const Plan& p, int64_t m, int64_t panels, int64_t task) {
  const int64_t group = task / p.row_blocks, block = task % p.row_blocks;
  const int64_t r0 = block * p.block_rows, panel0 = group * p.group_panels;
  return {r0, std::min(p.block_rows, m - r0), panel0, std::min(panels, panel0 + p.group_panels)};
}

/// A's `live` rows from `row` over K [k0, k0 + depth): in place, or gathered into `rows_here` (live * depth floats);
/// `stride` gets the floats from one row to the next.
inline const float* strip_rows(const Source& src, int64_t row, int64_t live, int64_t k0, int64_t depth,
                               float* rows_here, int64_t& stride) {
  if (!src.gather) {
    stride = src.lda;
    return src.a + row * src.lda + k0;
  }
  (*src.gather)(row, live, k0, depth, rows_here);
  stride = depth;
  return rows_here;
}

/// Asks for the cache lines a tile's store reads (the residual, or C's partial sums of an earlier K block) or
/// writes: `rows` rows of `floats` floats (a multiple of 16) from `at`, rows `ld` apart. Issued before the tile's
/// product, they arrive while it runs: a 1x1 convolution's residual comes from L3 or memory, and with K at 64 the
/// product is short (ResNet-50's 56x56 expansions took 0.45 ms with this in the model's run, 0.54 without).
inline void prefetch_tile(const float* at, int64_t ld, int64_t rows, int64_t floats) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t f = 0; f < floats; f += 16) __builtin_prefetch(at + i * ld + f, 0, 3);
}

/// ReLU and Clip, applied in registers as a tile is stored; the others run on the stored floats (activate_span).
bool inline_activation(const FusedActivation& f);
void activate_span(const FusedActivation& f, float* y, int64_t n);

/// One task of the plan on the AVX-512 kernel (packed_gemm_wide.cpp).
void run_wide_task(int64_t m, const Source& src, const PackedColumns& b, float* c, int64_t ldc, const GemmEpilogue& e,
                   const Plan& p, int64_t task);

}  // namespace kiln::cpu::gemm_detail
