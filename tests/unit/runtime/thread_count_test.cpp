// One thread count for the whole run: every OpenMP region a context's run starts (oneDNN's and kiln's own) has
// at most the context's thread count, the caller's count is back afterwards, small loops start no region, and
// kiln chose libgomp's wait policy before libgomp started. Regions are counted by wrapping GOMP_parallel, which
// every `#pragma omp parallel` of GCC-built code (kiln's, and Debian's oneDNN) calls.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "builder/builder.h"
#include "core/parallel.h"
#include "kernels/cpu/threads.h"
#include "kiln/network.h"
#include "runtime/engine.h"

namespace {

std::atomic<int> g_regions{0};  // parallel regions started since the last reset
std::atomic<int> g_widest{0};   // the largest team among them

using RegionFn = void (*)(void*);
struct Region {
  RegionFn fn;
  void* data;
};

void count_team(void* p) {
  const auto* region = static_cast<const Region*>(p);
  if (omp_get_thread_num() == 0) {
    const int team = omp_get_num_threads();
    g_regions.fetch_add(1);
    for (int w = g_widest.load(); team > w && !g_widest.compare_exchange_weak(w, team);) {
    }
  }
  region->fn(region->data);
}

}  // namespace

// The executable's definition comes first in symbol lookup, so the libraries' calls land here.
extern "C" void GOMP_parallel(RegionFn fn, void* data, unsigned num_threads, unsigned flags) {
  using Real = void (*)(RegionFn, void*, unsigned, unsigned);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "GOMP_parallel"));
  Region region{fn, data};
  real(count_team, &region, num_threads, flags);
}

namespace kiln {
namespace {

void reset_counts() {
  g_regions = 0;
  g_widest = 0;
}

std::vector<float> pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 7919 + static_cast<size_t>(seed) * 104729) % 23) / 23.f - 0.5f;
  return v;
}

constexpr int64_t kChannels = 64, kSize = 28;

// conv 3x3 (oneDNN) -> relu -> times the input (large enough for every kernel to want all threads).
std::shared_ptr<const EngineImpl> build_net() {
  Network net;
  static const std::vector<float> w = pattern(kChannels * kChannels * 9, 1), b = pattern(kChannels, 2);
  auto x = net.add_input("x", DataType::kFloat32, {1, kChannels, kSize, kSize});
  EXPECT_TRUE(x.is_ok()) << x.status().to_string();
  auto conv = net.add_convolution(*x, kChannels, {3, 3}, float_weights(w), float_weights(b));
  EXPECT_TRUE(conv.is_ok()) << conv.status().to_string();
  EXPECT_TRUE((*conv)->set_padding({1, 1}).is_ok());
  auto relu = net.add_activation((*conv)->output(0), ActivationType::kRelu);
  auto prod = net.add_elementwise((*relu)->output(0), *x, ElementWiseOperation::kProd);
  EXPECT_TRUE(prod.is_ok()) << prod.status().to_string();
  EXPECT_TRUE((*prod)->output(0)->set_name("y").is_ok());
  EXPECT_TRUE(net.mark_output((*prod)->output(0)).is_ok());
  auto bytes = build_engine(net, BuildOptions{});
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes) return nullptr;
  auto engine = EngineImpl::deserialize(*bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  return engine ? *engine : nullptr;
}

Tensor input() {
  const std::vector<float> v = pattern(kChannels * kSize * kSize, 3);
  Tensor t = *Tensor::empty(DataType::kFloat32, Dims{1, kChannels, kSize, kSize});
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  return t;
}

// Runs a context made while the caller's count is `caller_threads`, set to `context_threads`; the output.
Tensor run(const EngineImpl& engine, int caller_threads, int context_threads) {
  const CpuThreadsScope caller(caller_threads);
  auto ctx = engine.create_execution_context();
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  if (!ctx) return Tensor();
  (*ctx)->set_threads(context_threads);
  EXPECT_TRUE((*ctx)->set_input("x", input()).is_ok());
  reset_counts();
  const Status st = (*ctx)->execute();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(cpu_threads(), caller_threads) << "the run left the caller's thread count changed";
  auto y = (*ctx)->output("y");
  EXPECT_TRUE(y.is_ok()) << y.status().to_string();
  return y ? y->clone().value() : Tensor();
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.numel(), b.numel());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f * (1.f + std::fabs(b.data<float>()[i]))) << i;
}

TEST(ThreadCount, AOneThreadContextStartsNoWiderTeamThanOne) {
  const CpuThreadsScope build_threads(4);  // kernels made and timed for 4 threads
  auto engine = build_net();
  ASSERT_NE(engine, nullptr);
  const Tensor wide = run(*engine, 4, 4);
  EXPECT_EQ(g_widest.load(), 4) << "a 4-thread run should start 4-thread regions";
  const Tensor one = run(*engine, 4, 1);
  EXPECT_LE(g_widest.load(), 1) << g_regions.load() << " regions, the widest of " << g_widest.load() << " threads";
  expect_same(one, wide);
}

TEST(ThreadCount, ATwoThreadContextUsesTwoWhateverTheCallerHas) {
  const CpuThreadsScope build_threads(1);
  auto engine = build_net();
  ASSERT_NE(engine, nullptr);
  const Tensor one = run(*engine, 1, 0);
  EXPECT_LE(g_widest.load(), 1);
  const Tensor two = run(*engine, 1, 2);
  EXPECT_EQ(g_widest.load(), 2) << g_regions.load() << " regions";
  const Tensor three = run(*engine, 5, 3);
  EXPECT_EQ(g_widest.load(), 3) << g_regions.load() << " regions";
  expect_same(two, one);
  expect_same(three, one);
}

TEST(ThreadCount, ParallelForStartsRegionsOnlyForWorkWorthThem) {
  const CpuThreadsScope threads(4);
  std::vector<std::atomic<int>> hits(64);
  auto touch = [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); };
  reset_counts();
  parallel_for(64, 64, touch);  // not over the grain: inline
  EXPECT_EQ(g_regions.load(), 0);
  parallel_for(3, 1, touch);  // three items: no team wider than three
  EXPECT_EQ(g_regions.load(), 1);
  EXPECT_EQ(g_widest.load(), 3);
  parallel_for(64, 4, touch);
  EXPECT_EQ(g_widest.load(), 4);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), i < 3 ? 3 : 2) << i;
  {
    const CpuThreadsScope one(1);
    reset_counts();
    parallel_for(64, 1, touch);  // a team of one: inline
    EXPECT_EQ(g_regions.load(), 0);
  }
  EXPECT_EQ(cpu_threads(), 4);
}

// A thread held up on its first item (as one whose core another process took) leaves the rest of the loop to the
// other: item 0 waits until every item outside its piece of 4 is done, which with the loop cut in one share per
// thread (items 0-31 the held thread's own) could not happen. The wait gives up after 20 s and the test then fails.
TEST(ThreadCount, AHeldUpThreadLeavesTheRestOfTheLoopToTheOthers) {
  const CpuThreadsScope threads(2);
  constexpr int64_t kItems = 64;
  constexpr int64_t kPiece = 4;
  EXPECT_EQ(piece_items(kItems, 1, 2), kPiece);
  std::atomic<int64_t> done{0};
  std::atomic<bool> others_finished{false};
  std::vector<int> thread_of(kItems, -1);
  parallel_for(kItems, 1, [&](int64_t i) {
    thread_of[static_cast<size_t>(i)] = omp_get_thread_num();
    if (i == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < kItems - kPiece && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      others_finished = done.load() >= kItems - kPiece;
    }
    done.fetch_add(1);
  });
  EXPECT_TRUE(others_finished.load()) << "item 0's thread still had items of its own to do";
  int held_items = 0;
  for (int t : thread_of) held_items += t == thread_of[0] ? 1 : 0;
  EXPECT_EQ(held_items, kPiece) << "the held-up thread should do its first piece only";
  EXPECT_EQ(done.load(), kItems);
}

TEST(ThreadCount, KilnChoseTheWaitPolicyBeforeLibgompStarted) {
  const char* n = std::getenv("OMP_NUM_THREADS");
  if ((n && std::strtol(n, nullptr, 10) == 1) || omp_get_num_procs() == 1)
    GTEST_SKIP() << "one thread by default: whether libgomp had started cannot be told";
  EXPECT_NE(openmp_wait(), OpenMpWait::kLibgompDefault) << openmp_wait_description();
  if (openmp_wait() == OpenMpWait::kShortSpin) {
    ASSERT_NE(std::getenv("GOMP_SPINCOUNT"), nullptr);
    EXPECT_STREQ(std::getenv("GOMP_SPINCOUNT"), kShortOpenMpSpin);
  }
}

}  // namespace
}  // namespace kiln
