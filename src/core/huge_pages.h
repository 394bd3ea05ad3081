#pragma once
// Transparent huge pages for large host buffers (weights, activation arenas, engine sections): where the kernel runs
// them in "madvise" mode, a 4 KB page costs a fault on first touch (ResNet-50's build spent a third of its time in
// page faults on this project's VMs) and a TLB entry on every pass over the weights.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace kiln {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

/// Asks for huge pages over the whole 2 MB pages inside [p, p + bytes). Advice only: where the kernel has none, or
/// for a range too small, nothing changes.
inline void advise_huge_pages(void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t last = end / kHugePageBytes * kHugePageBytes;
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

}  // namespace kiln
