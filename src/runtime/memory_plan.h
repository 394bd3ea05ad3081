#pragma once
// The activation memory planner: places blocks that live over step intervals in one arena so that
// blocks alive at the same time never overlap (greedy by size, best fit between placed blocks).
#include <cstddef>
#include <vector>

namespace kiln {

struct MemoryBlock {
  size_t bytes = 0;
  int first = 0;  ///< the step that writes it
  int last = 0;   ///< the last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  ///< per block, multiples of the alignment
  size_t total = 0;             ///< the arena's size
  size_t unplanned = 0;         ///< the sum of the blocks' aligned sizes
};

MemoryPlan plan_memory(const std::vector<MemoryBlock>& blocks, size_t alignment = 64);

}  // namespace kiln
