#include "core/caching_allocator.h"

#include <bit>

namespace kiln {

CachingAllocator::CachingAllocator(Allocator& upstream, size_t max_events)
    : upstream_(upstream), max_events_(max_events) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  release_cache_locked();
}

size_t CachingAllocator::bin_size(size_t bytes) {
  constexpr size_t kMin = 512;
  if (bytes <= kMin) return kMin;
  const size_t step = std::bit_floor(bytes) / 8;  // 8 bins per power of two: at most 12.5% rounding
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes, size_t alignment, std::string_view tag) {
  const size_t size = bin_size(bytes);
  std::lock_guard lock(mu_);
  void* p = nullptr;
  // A cached block of this bin or up to a quarter larger.
  for (auto it = free_.lower_bound(size); it != free_.end() && it->first <= size + size / 4; ++it) {
    if (alignment > 1 && reinterpret_cast<uintptr_t>(it->second) % alignment != 0) continue;
    p = it->second;
    live_[p] = it->first;
    stats_.cached_bytes -= it->first;
    free_.erase(it);
    ++stats_.cache_hits;
    break;
  }
  if (!p) {
    p = upstream_.allocate(size, alignment, tag);
    if (!p && !free_.empty()) {  // out of memory: give the cache back and try once more
      release_cache_locked();
      p = upstream_.allocate(size, alignment, tag);
    }
    if (!p) return nullptr;
    live_[p] = size;
    stats_.reserved_bytes += size;
    ++stats_.upstream_allocations;
  }
  live_asked_[p] = bytes;
  ++stats_.allocations;
  stats_.in_use_bytes += bytes;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  if (events_.size() < max_events_)
    events_.push_back({std::chrono::steady_clock::now(), static_cast<int64_t>(bytes), reinterpret_cast<uintptr_t>(p),
                       std::string(tag)});
  return p;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: a double free or a foreign pointer; never hand it out
  const size_t size = it->second;
  live_.erase(it);
  auto asked = live_asked_.find(ptr);
  const size_t bytes = asked == live_asked_.end() ? 0 : asked->second;
  if (asked != live_asked_.end()) live_asked_.erase(asked);
  stats_.in_use_bytes -= std::min(stats_.in_use_bytes, bytes);
  free_.emplace(size, ptr);
  stats_.cached_bytes += size;
  if (events_.size() < max_events_)
    events_.push_back(
        {std::chrono::steady_clock::now(), -static_cast<int64_t>(bytes), reinterpret_cast<uintptr_t>(ptr), {}});
}

void CachingAllocator::release_cache() {
  std::lock_guard lock(mu_);
  release_cache_locked();
}

void CachingAllocator::release_cache_locked() {
  for (auto& [size, p] : free_) {
    upstream_.deallocate(p, size);
    stats_.reserved_bytes -= std::min(stats_.reserved_bytes, size);
  }
  free_.clear();
  stats_.cached_bytes = 0;
  ++stats_.cache_releases;
}

CacheStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  CacheStats s = stats_;
  s.in_use_blocks = live_.size();
  return s;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

std::vector<AllocationEvent> CachingAllocator::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

}  // namespace kiln
