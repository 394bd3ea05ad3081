// The trainer in one process on the CPU: gradient accumulation against one big batch, float16 loss scaling
// (exact at a power-of-two scale where nothing runs in float16, steps skipped and the scale lowered on overflow).
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace kiln::train {
namespace {
namespace fs = std::filesystem;

// Synthetic 28x28 grey images, fashion_cnn of width 4, SGD: a few seconds on two cores.
TrainConfig config(const std::vector<std::string>& overrides) {
  const std::string text = R"(
model: {name: fashion_cnn, width: 4}
data: {format: synthetic, train_limit: 256, height: 28, width: 28, channels: 1, classes: 10, batch_size: 32,
       scale: 1.0, workers: 0}
optim: {name: momentum, lr: 0.05}
trainer: {epochs: 1, threads: 2, log_every: 1, progress: false}
)";
  auto c = parse_train_config(text, "test.yaml", overrides);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : TrainConfig{};
}

struct TrainedRun {
  std::map<std::string, std::vector<float>> params;
  TrainResult result;
};

TrainedRun train(const std::vector<std::string>& overrides, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_trainer_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  TrainedRun run;
  auto t = Trainer::create(config(overrides), dir.string());
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t.is_ok()) return run;
  auto r = (*t)->fit();
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (r.is_ok()) run.result = *r;
  auto store = (*t)->parameters();
  EXPECT_TRUE(store.is_ok());
  for (const auto& [n, e] : (*store)->entries())
    run.params[n] = std::vector<float>(e.value.data<float>(), e.value.data<float>() + e.value.numel());
  fs::remove_all(dir);
  return run;
}

double max_rel_diff(const TrainedRun& a, const TrainedRun& b) {
  double worst = 0;
  for (const auto& [n, va] : a.params) {
    const auto& vb = b.params.at(n);
    for (size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(va[i]) - vb[i]) / (1e-3 + std::abs(va[i])));
  }
  return worst;
}

TEST(Trainer, GradAccumulationMatchesOneBigBatch) {
  const TrainedRun big = train({}, "big");
  const TrainedRun halves = train({"data.batch_size=16", "trainer.grad_accumulation=2"}, "halves");
  ASSERT_FALSE(big.params.empty());
  ASSERT_EQ(big.result.steps, 8);
  ASSERT_EQ(halves.result.steps, 16);          // micro-batches
  EXPECT_LT(max_rel_diff(big, halves), 1e-3);  // rounding (the run to run spread is ~1e-4)
  // Without accumulation the halves take twice the steps and end elsewhere.
  const TrainedRun small = train({"data.batch_size=16"}, "small");
  EXPECT_GT(max_rel_diff(big, small), 1.0);
}

TEST(Trainer, Float16LossScalingAtAPowerOfTwoChangesNothingWhereNothingRunsInFloat16) {
  // The CPU backend has no float16 convolutions, so the graph stays float32: scaling the loss by 1024 and the
  // gradients back by 1/1024 is exact in every op; only the backward's structure differs (the seed is an input
  // instead of a folded constant 1), so sums may round differently.
  const TrainedRun plain = train({}, "fp32");
  const TrainedRun scaled = train({"trainer.precision=fp16", "trainer.loss_scale=1024"}, "scaled");
  ASSERT_FALSE(plain.params.empty());
  EXPECT_EQ(scaled.result.skipped_steps, 0);
  EXPECT_EQ(scaled.result.loss_scale, 1024);
  EXPECT_LT(max_rel_diff(plain, scaled), 1e-3);  // an unscaling mistake would be off by 1024x
}

TEST(Trainer, Float16OverflowSkipsStepsAndLowersTheScale) {
  const double start = std::ldexp(1.0, 127);
  const TrainedRun r =
      train({"trainer.precision=fp16", "trainer.loss_scale=1.7014118346046923e38", "trainer.epochs=3"}, "overflow");
  ASSERT_FALSE(r.params.empty());
  EXPECT_GE(r.result.skipped_steps, 1);
  EXPECT_LT(r.result.skipped_steps, 24);
  EXPECT_LT(r.result.loss_scale, start);
  for (const auto& [n, v] : r.params)
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << n;
  // A fixed scale never changes, so every step overflows.
  const TrainedRun fixed =
      train({"trainer.precision=fp16", "trainer.loss_scale=1.7014118346046923e38", "trainer.loss_scale_dynamic=false"},
            "fixed");
  EXPECT_EQ(fixed.result.skipped_steps, 8);
}

}  // namespace
}  // namespace kiln::train
