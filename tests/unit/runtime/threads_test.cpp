// Thread safety: one engine of a real model (convolutions, pooling, control flow), eight threads each with its
// own execution context, all giving the outputs one context gives alone. CI also runs this under
// ThreadSanitizer (the tsan preset).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "builder/builder.h"
#include "onnx/importer.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

constexpr int kThreads = 8;
constexpr int kRuns = 3;

std::vector<Tensor> run_once(ContextImpl& ctx, const std::string& input, const Tensor& x,
                             const std::vector<std::string>& outputs) {
  std::vector<Tensor> out;
  if (!ctx.set_input(input, x).is_ok() || !ctx.execute().is_ok()) return out;
  for (const std::string& name : outputs) {
    auto t = ctx.output(name);
    if (!t) return {};
    out.push_back(t->clone().value());
  }
  return out;
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dims() != b[i].dims() || a[i].dtype() != b[i].dtype()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  }
  return true;
}

TEST(Threads, ContextsOfARealModelOnEightThreadsMatchOneContext) {
  auto model = onnx_import::import_file(KILN_TEST_MODEL);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto bytes = build_engine(*model->graph, BuildOptions{});
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const Value* in = (*engine)->graph().inputs()[0];
  ASSERT_TRUE(in->dims.is_static());

  // A different random image per run; the reference is one context, alone.
  std::vector<Tensor> images;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  for (int r = 0; r < kRuns; ++r) {
    Tensor x = *Tensor::empty(DataType::kFloat32, in->dims);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = uniform(rng);
    images.push_back(std::move(x));
  }
  const std::vector<std::string> outputs = (*engine)->output_names();
  std::vector<std::vector<Tensor>> want;
  {
    auto ctx = (*engine)->create_execution_context().value();
    for (const Tensor& x : images) want.push_back(run_once(*ctx, in->name, x, outputs));
  }
  for (const auto& w : want) ASSERT_FALSE(w.empty());

  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto ctx = (*engine)->create_execution_context();
      if (!ctx) {
        mismatches[t] = -1;
        return;
      }
      for (int r = 0; r < kRuns; ++r) {
        const int k = (r + t) % kRuns;  // threads run the images in different orders
        if (!same(run_once(**ctx, in->name, images[k], outputs), want[k])) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace kiln
