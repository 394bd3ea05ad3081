// The caching allocator (over host memory here; the GPU's cache is the same code over cudaMalloc): freed
// blocks are reused, peaks are kept, the cache is released when upstream fails, and it is thread-safe.
#include <gtest/gtest.h>

#include <thread>

#include "core/caching_allocator.h"

namespace kiln {
namespace {

// Host memory with a limit on what may be outstanding at once (an out-of-memory upstream).
class LimitedAllocator final : public Allocator {
 public:
  explicit LimitedAllocator(size_t limit) : limit_(limit) {}
  void* allocate(size_t bytes, size_t alignment, std::string_view tag) override {
    if (used_ + bytes > limit_) return nullptr;
    used_ += bytes;
    ++calls_;
    return cpu_allocator().allocate(bytes, alignment, tag);
  }
  void deallocate(void* ptr, size_t bytes) override {
    used_ -= bytes;
    cpu_allocator().deallocate(ptr, bytes);
  }
  Device device() const override { return Device::cpu(); }
  size_t used() const { return used_; }
  int calls() const { return calls_; }

 private:
  size_t limit_, used_ = 0;
  int calls_ = 0;
};

TEST(CachingAllocator, BinsRoundUpByAtMostAnEighth) {
  EXPECT_EQ(CachingAllocator::bin_size(0), 512u);
  EXPECT_EQ(CachingAllocator::bin_size(512), 512u);
  EXPECT_EQ(CachingAllocator::bin_size(1000), 1024u);
  EXPECT_EQ(CachingAllocator::bin_size(1 << 20), size_t{1} << 20);
  for (size_t n : {513u, 4097u, 100000u, 3000000u, 123456789u}) {
    const size_t b = CachingAllocator::bin_size(n);
    EXPECT_GE(b, n);
    EXPECT_LE(b, n + n / 8 + 1) << n;
  }
}

TEST(CachingAllocator, FreedBlocksAreReusedAndPeaksKept) {
  LimitedAllocator upstream(size_t{1} << 30);
  CachingAllocator cache(upstream);
  void* a = cache.allocate(1000, 64, "a");
  void* b = cache.allocate(2000, 64, "b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(cache.stats().in_use_bytes, 3000u);
  cache.deallocate(a, 1000);
  cache.deallocate(b, 2000);
  void* c = cache.allocate(900, 64, "c");  // the same bin as 1000: the freed block comes back
  EXPECT_EQ(c, a);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.upstream_allocations, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.in_use_bytes, 900u);
  EXPECT_EQ(s.peak_in_use_bytes, 3000u);
  EXPECT_EQ(s.in_use_blocks, 1u);
  EXPECT_EQ(s.reserved_bytes, CachingAllocator::bin_size(1000) + CachingAllocator::bin_size(2000));
  cache.reset_peak();
  EXPECT_EQ(cache.stats().peak_in_use_bytes, 900u);
  cache.deallocate(c, 900);
  EXPECT_EQ(cache.events().size(), 6u);
  cache.release_cache();
  EXPECT_EQ(cache.stats().reserved_bytes, 0u);
  EXPECT_EQ(upstream.used(), 0u);
}

TEST(CachingAllocator, UpstreamFailureReleasesTheCacheAndRetries) {
  LimitedAllocator upstream(64 << 10);
  CachingAllocator cache(upstream);
  void* a = cache.allocate(40 << 10, 64, "a");
  ASSERT_NE(a, nullptr);
  cache.deallocate(a, 40 << 10);
  // 60 KiB does not fit beside the cached 40 KiB block: the cache goes back and the retry succeeds.
  void* b = cache.allocate(60 << 10, 64, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(cache.stats().cache_releases, 1u);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  EXPECT_EQ(cache.allocate(60 << 10, 64, "too much"), nullptr);
  cache.deallocate(b, 60 << 10);
}

TEST(CachingAllocator, ThreadsShareOneCache) {
  LimitedAllocator upstream(size_t{1} << 30);
  CachingAllocator cache(upstream);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 500; ++i) {
        const size_t bytes = 256 + static_cast<size_t>((i * 37 + t * 11) % 5000);
        void* p = cache.allocate(bytes, 64, "t");
        ASSERT_NE(p, nullptr);
        static_cast<char*>(p)[bytes - 1] = 1;
        cache.deallocate(p, bytes);
      }
    });
  for (auto& th : threads) th.join();
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.allocations, 2000u);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.in_use_blocks, 0u);
  EXPECT_LT(s.upstream_allocations, 200u);  // steady state: blocks come back from the cache
}

}  // namespace
}  // namespace kiln
