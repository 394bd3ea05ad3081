#include "kiln/allocator.h"

#include <cstdlib>

#include "core/huge_pages.h"

namespace kiln {
namespace {

constexpr size_t kHugeFrom = size_t{2} << 20;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes, size_t alignment, std::string_view) override {
    if (alignment < 64) alignment = 64;
    // A large block (weights, activation arenas) starts on a 2 MB boundary and its whole 2 MB pages are huge pages
    // (core/huge_pages.h); its size is not rounded up to them, so no memory is added.
    const bool huge = bytes >= kHugeFrom;
    if (huge && alignment < kHugePageBytes) alignment = kHugePageBytes;
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
    if (p && huge) advise_huge_pages(p, bytes);
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;  // never destroyed: tensors in statics outlive it otherwise
  return *allocator;
}

TrackingAllocator::TrackingAllocator(Allocator& inner, size_t max_events) : inner_(inner), max_events_(max_events) {}

void* TrackingAllocator::allocate(size_t bytes, size_t alignment, std::string_view tag) {
  void* p = inner_.allocate(bytes, alignment, tag);
  if (!p) return nullptr;
  std::lock_guard lock(mu_);
  current_ += bytes;
  peak_ = std::max(peak_, current_);
  ++count_;
  if (events_.size() < max_events_)
    events_.push_back({std::chrono::steady_clock::now(), static_cast<int64_t>(bytes), reinterpret_cast<uintptr_t>(p),
                       std::string(tag)});
  return p;
}

void TrackingAllocator::deallocate(void* ptr, size_t bytes) {
  inner_.deallocate(ptr, bytes);
  std::lock_guard lock(mu_);
  current_ -= std::min(current_, bytes);
  if (events_.size() < max_events_)
    events_.push_back(
        {std::chrono::steady_clock::now(), -static_cast<int64_t>(bytes), reinterpret_cast<uintptr_t>(ptr), {}});
}

size_t TrackingAllocator::current_bytes() const {
  std::lock_guard lock(mu_);
  return current_;
}
size_t TrackingAllocator::peak_bytes() const {
  std::lock_guard lock(mu_);
  return peak_;
}
size_t TrackingAllocator::allocation_count() const {
  std::lock_guard lock(mu_);
  return count_;
}
std::vector<AllocationEvent> TrackingAllocator::events() const {
  std::lock_guard lock(mu_);
  return events_;
}
void TrackingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  peak_ = current_;
}

}  // namespace kiln
