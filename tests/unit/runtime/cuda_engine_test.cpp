// Engines built for CUDA run on the GPU: the same outputs as the CPU engine, host-fallback steps, contexts on
// several streams at once, the public API with GPU and host addresses, CUDA graphs, the context's memory cache
// and out-of-memory errors. Each test skips without a GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "builder/builder.h"
#include "core/cuda_runtime.h"
#include "kiln/network.h"
#include "kiln/plugin.h"
#include "kiln/runtime.h"
#include "runtime/engine.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

#define REQUIRE_GPU()                                                            \
  if (!cuda::gpu_available()) {                                                  \
    GTEST_SKIP() << "skipped: no GPU (" << cuda::query_runtime().problem << ")"; \
  }

std::vector<float> pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 7919 + static_cast<size_t>(seed) * 104729) % 23) / 23.f - 0.5f;
  return v;
}

// A plugin op has a CPU kernel only: in a CUDA engine it is always a host-fallback step.
void register_halve() {
  if (has_plugin("CudaTestHalve")) return;
  PluginDef def;
  def.name = "CudaTestHalve";
  def.summary = "y = x / 2 (CPU only)";
  def.infer = [](std::span<const PluginTensorDesc> in, const PluginFields&) -> Result<std::vector<PluginTensorDesc>> {
    return std::vector<PluginTensorDesc>{in[0]};
  };
  def.run_cpu = [](std::span<const Tensor> in, std::span<Tensor> out, const PluginFields&) -> Status {
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, in[0].at(i) * 0.5);
    return Status::ok();
  };
  ASSERT_TRUE(register_plugin(std::move(def)).is_ok());
}

// conv 3x3 (+bias) -> relu -> [a CPU-only plugin] -> max pool 2x2 -> fully connected -> softmax.
std::unique_ptr<Network> small_net(bool with_host_step) {
  auto net = std::make_unique<Network>();
  static const std::vector<float> w1 = pattern(8 * 3 * 3 * 3, 1), b1 = pattern(8, 2), w2 = pattern(10 * 8 * 7 * 7, 3),
                                  b2 = pattern(10, 4);
  auto x = net->add_input("image", DataType::kFloat32, {2, 3, 16, 16});
  auto conv = net->add_convolution(*x, 8, {3, 3}, float_weights(w1), float_weights(b1));
  EXPECT_TRUE(conv.is_ok()) << conv.status().to_string();
  auto relu = net->add_activation((*conv)->output(0), ActivationType::kRelu);
  NetworkTensor* t = (*relu)->output(0);
  if (with_host_step) {
    register_halve();
    NetworkTensor* const in[] = {t};
    auto halve = net->add_plugin("CudaTestHalve", in);
    EXPECT_TRUE(halve.is_ok()) << halve.status().to_string();
    t = (*halve)->output(0);
  }
  auto pool = net->add_pooling(t, PoolingType::kMax, {2, 2});
  EXPECT_TRUE(pool.is_ok()) << pool.status().to_string();
  EXPECT_TRUE((*pool)->set_stride({2, 2}).is_ok());
  auto fc = net->add_fully_connected((*pool)->output(0), 10, float_weights(w2), float_weights(b2));
  EXPECT_TRUE(fc.is_ok()) << fc.status().to_string();
  auto prob = net->add_softmax((*fc)->output(0));
  EXPECT_TRUE(prob.is_ok()) << prob.status().to_string();
  EXPECT_TRUE((*prob)->output(0)->set_name("prob").is_ok());
  EXPECT_TRUE(net->mark_output((*prob)->output(0)).is_ok());
  return net;
}

std::shared_ptr<const EngineImpl> build(const Network& net, Backend backend, BuildReport* report = nullptr) {
  BuildOptions opt;
  opt.backend = backend;
  auto bytes = build_engine(net, opt, report);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes) return nullptr;
  auto engine = EngineImpl::deserialize(*bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  return engine ? *engine : nullptr;
}

Tensor image(int seed) {
  const std::vector<float> v = pattern(2 * 3 * 16 * 16, seed);
  Tensor t = *Tensor::empty(DataType::kFloat32, Dims{2, 3, 16, 16});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor run(const EngineImpl& engine, const Tensor& x) {
  auto ctx = engine.create_execution_context();
  EXPECT_TRUE(ctx.is_ok());
  EXPECT_TRUE((*ctx)->set_input("image", x).is_ok());
  Status st = (*ctx)->execute();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  auto y = (*ctx)->output("prob");
  EXPECT_TRUE(y.is_ok()) << y.status().to_string();
  return y ? *y : Tensor();
}

void expect_close(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_TRUE(got.defined() && want.defined()) << what;
  ASSERT_TRUE(got.device().is_cpu()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::fabs(got.at(i) - want.at(i)));
  EXPECT_LT(worst, 1e-4) << what;
}

TEST(CudaEngine, SmallNetworkMatchesTheCpuEngine) {
  REQUIRE_GPU();
  auto net = small_net(false);
  BuildReport report;
  auto gpu = build(*net, Backend::kCuda, &report);
  auto cpu = build(*net, Backend::kCpu);
  ASSERT_TRUE(gpu && cpu);
  EXPECT_TRUE(gpu->device().is_cuda());
  for (const auto& c : report.choices) std::printf("  %s\n", c.c_str());
  EXPECT_EQ(gpu->host_fallback_count(), report.host_fallbacks);
  expect_close(run(*gpu, image(5)), run(*cpu, image(5)), "small network");
  // A second context shares the engine's uploaded weights.
  expect_close(run(*gpu, image(6)), run(*cpu, image(6)), "second context");
}

TEST(CudaEngine, ANodeWithoutACudaKernelRunsOnTheHost) {
  REQUIRE_GPU();
  auto net = small_net(true);
  BuildReport report;
  auto gpu = build(*net, Backend::kCuda, &report);
  auto cpu = build(*net, Backend::kCpu);
  ASSERT_TRUE(gpu && cpu);
  EXPECT_GE(report.host_fallbacks, 1);
  EXPECT_GE(gpu->host_fallback_count(), 1);
  bool warned = false;
  for (const auto& w : report.warnings) warned |= w.find("no CUDA kernel") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_NE(layer_info_json(*gpu, nullptr).find("\"HostFallback\": true"), std::string::npos);
  expect_close(run(*gpu, image(7)), run(*cpu, image(7)), "with a host-fallback step");
}

TEST(CudaEngine, TwoContextsOnTwoStreamsAtOnce) {
  REQUIRE_GPU();
  auto net = small_net(false);
  auto gpu = build(*net, Backend::kCuda);
  auto cpu = build(*net, Backend::kCpu);
  ASSERT_TRUE(gpu && cpu);
  const Tensor want[2] = {run(*cpu, image(11)), run(*cpu, image(12))};
  std::vector<std::thread> threads;
  Status status[2];
  Tensor got[2];
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto ctx = gpu->create_execution_context();
      auto stream = create_stream(Device::cuda(0));
      if (!ctx || !stream) {
        status[t] = internal_error("no context or stream");
        return;
      }
      const Tensor x = image(11 + t);
      for (int i = 0; i < 20 && status[t].is_ok(); ++i) {
        status[t] = (*ctx)->set_input("image", x);
        if (status[t].is_ok()) status[t] = (*ctx)->execute(**stream);
      }
      if (status[t].is_ok()) got[t] = *(*ctx)->output("prob");
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(status[t].is_ok()) << status[t].to_string();
    expect_close(got[t], want[t], "stream");
  }
}

TEST(CudaEngine, PublicApiTakesGpuAndHostAddresses) {
  REQUIRE_GPU();
  auto net = small_net(false);
  BuildOptions opt;
  opt.backend = Backend::kCuda;
  auto bytes = build_engine(*net, opt);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto cpu = build(*net, Backend::kCpu);
  const Tensor want = run(*cpu, image(21));
  Runtime runtime;
  auto engine = runtime.deserialize_engine(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.is_ok());
  auto stream = create_stream(Device::cuda(0));
  ASSERT_TRUE(stream.is_ok());
  // The input in GPU memory (used in place), the output into pageable host memory (staged).
  const Tensor x = image(21);
  auto dx = Tensor::empty(DataType::kFloat32, x.dims(), cuda::device_allocator(0));
  ASSERT_TRUE(dx.is_ok());
  ASSERT_TRUE(cuda::copy(x, *dx).is_ok());
  std::vector<float> y(20, -1.f);
  ASSERT_TRUE((*ctx)->set_tensor_address("image", dx->raw()).is_ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("prob", y.data(), y.size() * sizeof(float)).is_ok());
  auto consumed = create_event(Device::cuda(0));
  ASSERT_TRUE(consumed.is_ok());
  Status st = (*ctx)->enqueue(**stream, consumed->get());
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE((*stream)->synchronize().is_ok());
  expect_close(Tensor::view(y.data(), DataType::kFloat32, Dims{2, 10}), want, "public API");
  // The output written into GPU memory instead.
  auto dy = Tensor::empty(DataType::kFloat32, Dims{2, 10}, cuda::device_allocator(0));
  ASSERT_TRUE(dy.is_ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("prob", dy->raw()).is_ok());
  st = (*ctx)->enqueue(**stream);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  Tensor hy = *Tensor::empty(DataType::kFloat32, Dims{2, 10});
  ASSERT_TRUE(cuda::copy(*dy, hy, stream->get()).is_ok());
  ASSERT_TRUE((*stream)->synchronize().is_ok());
  expect_close(hy, want, "GPU output address");
  ASSERT_TRUE((*ctx)->set_tensor_address("prob", y.data(), y.size() * sizeof(float)).is_ok());
  // A host input address (copied up) and execute() on the context's own stream.
  std::fill(y.begin(), y.end(), -1.f);
  ASSERT_TRUE((*ctx)->set_tensor_address("image", x.raw()).is_ok());
  st = (*ctx)->execute();
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  expect_close(Tensor::view(y.data(), DataType::kFloat32, Dims{2, 10}), want, "host input");
}

TEST(CudaEngine, CudaGraphReplaysTheRun) {
  REQUIRE_GPU();
  auto net = small_net(false);
  auto gpu = build(*net, Backend::kCuda);
  auto cpu = build(*net, Backend::kCpu);
  ASSERT_TRUE(gpu && cpu);
  auto ctx = gpu->create_execution_context();
  auto stream = create_stream(Device::cuda(0));
  ASSERT_TRUE(ctx.is_ok() && stream.is_ok());
  auto dx = Tensor::empty(DataType::kFloat32, Dims{2, 3, 16, 16}, cuda::device_allocator(0));
  ASSERT_TRUE(dx.is_ok());
  ASSERT_TRUE(cuda::copy(image(31), *dx).is_ok());
  ASSERT_TRUE((*ctx)->set_input("image", *dx).is_ok());
  ASSERT_TRUE((*ctx)->enqueue(**stream).is_ok());  // warm-up: plans, library handles
  ASSERT_TRUE((*stream)->synchronize().is_ok());
  auto graph = (*ctx)->capture_graph(**stream);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  for (int seed : {32, 33}) {
    ASSERT_TRUE(cuda::copy(image(seed), *dx).is_ok());  // new values at the address the graph reads
    ASSERT_TRUE((*graph)->launch(**stream).is_ok());
    ASSERT_TRUE((*stream)->synchronize().is_ok());
    auto y = (*ctx)->output("prob");
    ASSERT_TRUE(y.is_ok());
    Tensor h = *Tensor::empty(DataType::kFloat32, y->dims());
    ASSERT_TRUE(cuda::copy(*y, h).is_ok());
    expect_close(h, run(*cpu, image(seed)), "graph replay");
  }
  // A host-fallback step cannot be captured: the error names it.
  auto with_host_step = build(*small_net(true), Backend::kCuda);
  ASSERT_TRUE(with_host_step && with_host_step->host_fallback_count() > 0);
  {
    auto c2 = with_host_step->create_execution_context();
    ASSERT_TRUE((*c2)->set_input("image", *dx).is_ok());
    auto g2 = (*c2)->capture_graph(**stream);
    ASSERT_FALSE(g2.is_ok());
    EXPECT_NE(g2.status().message().find("runs on the host"), std::string::npos) << g2.status().to_string();
  }
}

TEST(CudaEngine, CudaCandidatesAreTimedWithEventsAndCached) {
  REQUIRE_GPU();
  auto net = small_net(false);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln_cuda_cache_" + std::to_string(::getpid()) + ".json")).string();
  BuildOptions opt;
  opt.backend = Backend::kCuda;
  opt.optimization_level = 1;
  opt.timing_cache_path = path;
  opt.workspace_limit = uint64_t{1} << 30;  // with a limit even a lone candidate runs (its workspace is checked)
  BuildReport first, second;
  ASSERT_TRUE(build_engine(*net, opt, &first).is_ok());
  EXPECT_GT(first.timed, 0);
  std::ifstream in(path);
  const auto cache = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(cache.is_discarded());
  const std::string device = cache.value("device", "");
  EXPECT_NE(device.find(cuda::query_runtime().gpus.front().name), std::string::npos) << device;
  EXPECT_NE(device.find("compute capability"), std::string::npos) << device;
  double total_ms = 0;
  for (const auto& [key, ms] : cache["times"].items())
    if (key.find(".workspace") == std::string::npos) total_ms += ms.get<double>();
  EXPECT_GT(total_ms, 0.0);  // times measured with CUDA events
  ASSERT_TRUE(build_engine(*net, opt, &second).is_ok());
  EXPECT_EQ(second.timed, 0);
  EXPECT_EQ(second.cached, first.timed);
  std::filesystem::remove(path);
}

TEST(CudaEngine, ContextCacheReusesBlocksAndReportsPeaks) {
  REQUIRE_GPU();
  auto cache = cuda::make_device_cache(0);
  {
    auto a = Tensor::empty(DataType::kFloat32, Dims{1 << 20}, *cache);
    auto b = Tensor::empty(DataType::kFloat32, Dims{1 << 18}, *cache);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_TRUE(a->device().is_cuda());
  }
  const CacheStats first = cache->stats();
  EXPECT_EQ(first.in_use_bytes, 0u);
  EXPECT_EQ(first.peak_in_use_bytes, (size_t{1} << 22) + (size_t{1} << 20));
  for (int i = 0; i < 10; ++i) {
    auto a = Tensor::empty(DataType::kFloat32, Dims{1 << 20}, *cache);
    ASSERT_TRUE(a.is_ok());
  }
  const CacheStats later = cache->stats();
  EXPECT_EQ(later.upstream_allocations, first.upstream_allocations);  // every one came from the cache
  EXPECT_EQ(later.cache_hits, 10u);
  // A context's cache: the planned block and intermediates come back from it on every run.
  auto gpu = build(*small_net(false), Backend::kCuda);
  ASSERT_TRUE(gpu);
  auto ctx = gpu->create_execution_context();
  ASSERT_TRUE((*ctx)->set_input("image", image(41)).is_ok());
  ASSERT_TRUE((*ctx)->execute().is_ok());
  const size_t mallocs = (*ctx)->device_cache()->stats().upstream_allocations;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*ctx)->execute().is_ok());
  EXPECT_EQ((*ctx)->device_cache()->stats().upstream_allocations, mallocs);
  EXPECT_GT((*ctx)->device_cache()->stats().peak_in_use_bytes, 0u);
}

TEST(CudaEngine, OutOfMemorySaysSoWithTheSizes) {
  REQUIRE_GPU();
  auto t = Tensor::empty(DataType::kUInt8, Dims{int64_t{1} << 42}, cuda::device_allocator(0), "absurd");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kOutOfMemory);
  const std::string msg = t.status().message();
  EXPECT_NE(msg.find("out of GPU memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4398046511104 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MiB free of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("smaller"), std::string::npos) << msg;
  // The allocator still works afterwards.
  auto small = Tensor::empty(DataType::kUInt8, Dims{1024}, cuda::device_allocator(0));
  EXPECT_TRUE(small.is_ok());
}

}  // namespace
}  // namespace kiln
