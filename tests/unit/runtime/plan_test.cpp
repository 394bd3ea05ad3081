// The flat plan and its activation memory: placement by liveness, reuse across runs, new shapes,
// caller-provided memory.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "builder/builder.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/engine.h"
#include "runtime/memory_plan.h"

namespace kiln {
namespace {

TEST(MemoryPlan, BlocksAliveTogetherNeverOverlap) {
  std::mt19937 rng(7);
  std::vector<MemoryBlock> blocks;
  for (int i = 0; i < 200; ++i) {
    const int first = static_cast<int>(rng() % 100);
    blocks.push_back({1 + rng() % 100000, first, first + static_cast<int>(rng() % 10)});
  }
  const MemoryPlan plan = plan_memory(blocks, 64);
  size_t sum = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % 64, 0u);
    sum += (blocks[i].bytes + 63) / 64 * 64;
    EXPECT_LE(plan.offsets[i] + blocks[i].bytes, plan.total);
    for (size_t j = 0; j < i; ++j) {
      const bool together = blocks[i].first <= blocks[j].last && blocks[j].first <= blocks[i].last;
      const bool apart =
          plan.offsets[i] + blocks[i].bytes <= plan.offsets[j] || plan.offsets[j] + blocks[j].bytes <= plan.offsets[i];
      EXPECT_TRUE(!together || apart) << "blocks " << i << " and " << j;
    }
  }
  EXPECT_EQ(plan.unplanned, sum);
  EXPECT_LT(plan.total, sum / 2);
}

TEST(MemoryPlan, AChainPingPongsBetweenTwoBlocks) {
  std::vector<MemoryBlock> chain;
  for (int i = 0; i < 10; ++i) chain.push_back({1000, i, i + 1});
  const MemoryPlan plan = plan_memory(chain, 64);
  EXPECT_EQ(plan.total, 2 * 1024u);
  EXPECT_EQ(plan.unplanned, 10 * 1024u);
}

// x doubled `n` times: y1 = x + x, y2 = y1 + y1, ...
std::unique_ptr<Graph> doubling_chain(int n, Dims dims) {
  auto g = std::make_unique<Graph>();
  Value* v = *g->add_input("x", DataType::kFloat32, std::move(dims));
  for (int i = 0; i < n; ++i) {
    auto a = std::make_unique<ElementWiseAttrs>();
    a->op = ElementWiseOp::kSum;
    auto node = g->add_node("ElementWise", "double" + std::to_string(i), std::move(a), {v, v});
    EXPECT_TRUE(node.is_ok()) << node.status().to_string();
    if (!node) return g;
    v = (*node)->outputs[0];
  }
  EXPECT_TRUE(g->mark_output(v).is_ok());
  EXPECT_TRUE(g->infer_shapes().is_ok());
  return g;
}

std::shared_ptr<const EngineImpl> build(const Graph& g) {
  auto bytes = build_engine(g, BuildOptions{});
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto engine = EngineImpl::deserialize(*bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  return *engine;
}

Tensor ramp(int64_t n, float scale = 1.f) {
  Tensor t = *Tensor::empty(DataType::kFloat32, Dims{n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = scale * static_cast<float>(i % 13) - 3.f;
  return t;
}

void expect_doubled(const Tensor& x, const Tensor& y, int times) {
  ASSERT_EQ(x.dims(), y.dims());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], x.data<float>()[i] * float(1 << times));
}

TEST(Plan, IntermediatesShareTheActivationBlock) {
  auto g = doubling_chain(8, Dims{1000});
  auto engine = build(*g);
  auto ctx = engine->create_execution_context().value();
  auto report = ctx->memory_report();
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  // 7 intermediates of 4000 bytes (4032 aligned), the output outside: two blocks suffice.
  EXPECT_EQ(report->planned_values, 7);
  EXPECT_EQ(report->dynamic_values, 0);
  EXPECT_EQ(report->unplanned_bytes, 7 * 4032u);
  EXPECT_EQ(report->planned_bytes, 2 * 4032u);
  const Tensor x = ramp(1000);
  ASSERT_TRUE(ctx->set_input("x", x).is_ok());
  for (int run = 0; run < 2; ++run) {
    const Status st = ctx->execute();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    expect_doubled(x, *ctx->output(engine->output_names()[0]), 8);
  }
}

TEST(Plan, NewInputShapesArePlannedAgain) {
  auto g = doubling_chain(5, Dims{kDynamicDim});
  auto engine = build(*g);
  auto ctx = engine->create_execution_context().value();
  EXPECT_FALSE(ctx->memory_report().is_ok());  // a dynamic input must be set first
  for (int64_t n : {4, 4000, 16}) {
    const Tensor x = ramp(n, 0.5f);
    ASSERT_TRUE(ctx->set_input("x", x).is_ok());
    ASSERT_TRUE(ctx->execute().is_ok());
    expect_doubled(x, *ctx->output(engine->output_names()[0]), 5);
    EXPECT_EQ(ctx->memory_report()->planned_bytes, 2 * ((static_cast<size_t>(n) * 4 + 63) / 64 * 64));
  }
}

TEST(Plan, RunsInCallerMemoryAndRefusesTooLittle) {
  auto g = doubling_chain(4, Dims{256});
  auto engine = build(*g);
  auto ctx = engine->create_execution_context().value();
  const size_t need = ctx->memory_report()->planned_bytes;
  alignas(64) static char block[8192];
  ASSERT_LE(need, sizeof(block));
  const Tensor x = ramp(256);
  ASSERT_TRUE(ctx->set_input("x", x).is_ok());
  ctx->set_activation_memory(block, need - 64);
  const Status small = ctx->execute();
  EXPECT_FALSE(small.is_ok());
  EXPECT_NE(small.message().find("need " + std::to_string(need)), std::string::npos) << small.to_string();
  ctx->set_activation_memory(block, need);
  ASSERT_TRUE(ctx->execute().is_ok());
  expect_doubled(x, *ctx->output(engine->output_names()[0]), 4);
}

TEST(Plan, ContextsOnManyThreadsGiveIdenticalOutputs) {
  auto g = doubling_chain(6, Dims{kDynamicDim});
  auto engine = build(*g);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto ctx = engine->create_execution_context().value();
      for (int run = 0; run < 20; ++run) {
        const Tensor x = ramp(100 + 10 * (run % 3), 1.f + static_cast<float>(t));
        if (!ctx->set_input("x", x).is_ok() || !ctx->execute().is_ok()) {
          ++failures[t];
          continue;
        }
        const Tensor y = *ctx->output(engine->output_names()[0]);
        for (int64_t i = 0; i < x.numel(); ++i)
          if (y.data<float>()[i] != x.data<float>()[i] * 64.f) ++failures[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace kiln
