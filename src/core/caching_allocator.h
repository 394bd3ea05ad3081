#pragma once
// A caching allocator over another one (cudaMalloc, cudaHostAlloc): freed blocks go into size-rounded bins
// and are handed out again, so steady-state runs allocate nothing from the device. Thread-safe. When the
// upstream allocator fails, the cache is released and the allocation retried once.
// Blocks are reused in the order frees and allocations happen: on a GPU, memory freed while a stream still
// uses it is safe to hand out again only to work queued later on the same stream (an execution context
// owns one cache for this reason).
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/allocator.h"

namespace kiln {

struct CacheStats {
  size_t in_use_bytes = 0;          ///< bytes asked for by blocks handed out and not yet freed
  size_t peak_in_use_bytes = 0;     ///< the most in use at once (since the last reset_peak)
  size_t reserved_bytes = 0;        ///< bytes held from upstream (in use plus cached, rounded to the bins)
  size_t cached_bytes = 0;          ///< bytes of free blocks waiting in the bins
  size_t allocations = 0;           ///< allocations handed out
  size_t upstream_allocations = 0;  ///< of them, how many needed a new block from upstream
  size_t cache_hits = 0;            ///< of them, how many reused a freed block
  size_t cache_releases = 0;        ///< times the cache was emptied (upstream failures included)
  size_t in_use_blocks = 0;         ///< blocks handed out and not yet freed
};

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(Allocator& upstream, size_t max_events = 1 << 16);
  /// Gives every cached block back; blocks still in use must not be freed through it afterwards.
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes, size_t alignment, std::string_view tag) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return upstream_.device(); }

  /// Frees every cached (unused) block upstream.
  void release_cache();
  CacheStats stats() const;
  void reset_peak();
  std::vector<AllocationEvent> events() const;
  /// The size a request of `bytes` is rounded to: 512 bytes at least, then 8 bins per power of two.
  static size_t bin_size(size_t bytes);

 private:
  void release_cache_locked();

  Allocator& upstream_;
  size_t max_events_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;             // block size -> block
  std::unordered_map<void*, size_t> live_;        // block -> its size
  std::unordered_map<void*, size_t> live_asked_;  // block -> bytes asked for
  CacheStats stats_;
  std::vector<AllocationEvent> events_;
};

}  // namespace kiln
