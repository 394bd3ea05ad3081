#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace kiln {

namespace {
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

MemoryPlan plan_memory(const std::vector<MemoryBlock>& blocks, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(blocks.size(), 0);
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first: big blocks claim the low offsets, small ones fill the gaps between them.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;  // indices of placed blocks
  for (size_t i : order) {
    const size_t size = align_up(std::max<size_t>(blocks[i].bytes, 1), alignment);
    plan.unplanned += size;
    // Placed blocks alive at the same time, by offset.
    std::vector<size_t> live;
    for (size_t j : placed)
      if (blocks[j].first <= blocks[i].last && blocks[i].first <= blocks[j].last) live.push_back(j);
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, end = 0;
    for (size_t j : live) {
      const size_t start = plan.offsets[j];
      if (start >= end && start - end >= size && start - end < best_gap) {
        best = end;
        best_gap = start - end;
      }
      end = std::max(end, start + align_up(std::max<size_t>(blocks[j].bytes, 1), alignment));
    }
    plan.offsets[i] = best != SIZE_MAX ? best : end;
    plan.total = std::max(plan.total, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace kiln
