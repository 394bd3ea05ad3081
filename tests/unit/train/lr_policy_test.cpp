// Learning-rate policies: Caffe's formulas (and cosine) at a few steps, warm-up, the plot's curve, config
// errors. Expected values worked out by hand from the formulas (cosine also checked against PyTorch's
// CosineAnnealingLR: 0.868198051533946 at step 25 of 100 with eta_min 0.1).
#include <gtest/gtest.h>

#include <cmath>

#include "train/optim/lr_policy.h"

namespace kiln::train {
namespace {

LrPolicy make(const OptionMap& config, double base_lr, int64_t total_steps = 0) {
  auto policy = LrPolicy::create(config, base_lr, total_steps);
  EXPECT_TRUE(policy.is_ok()) << policy.status().to_string();
  return std::move(policy).value();
}

TEST(LrPolicy, CaffeFormulas) {
  LrPolicy fixed = make({{"name", "fixed"}}, 0.01);
  EXPECT_DOUBLE_EQ(fixed.lr(0), 0.01);
  EXPECT_DOUBLE_EQ(fixed.lr(123456), 0.01);

  LrPolicy step = make({{"name", "step"}, {"gamma", 0.1}, {"step_size", 100}}, 0.01);
  EXPECT_DOUBLE_EQ(step.lr(0), 0.01);
  EXPECT_DOUBLE_EQ(step.lr(99), 0.01);
  EXPECT_DOUBLE_EQ(step.lr(100), 0.001);
  EXPECT_DOUBLE_EQ(step.lr(250), 0.0001);

  LrPolicy multistep = make({{"name", "multistep"}, {"gamma", 0.5}, {"steps", {10, 30}}}, 1.0);
  EXPECT_DOUBLE_EQ(multistep.lr(9), 1.0);
  EXPECT_DOUBLE_EQ(multistep.lr(10), 0.5);
  EXPECT_DOUBLE_EQ(multistep.lr(29), 0.5);
  EXPECT_DOUBLE_EQ(multistep.lr(30), 0.25);
  EXPECT_DOUBLE_EQ(multistep.lr(1000), 0.25);

  LrPolicy exp = make({{"name", "exp"}, {"gamma", 0.99}}, 1.0);
  EXPECT_DOUBLE_EQ(exp.lr(2), 0.9801);
  EXPECT_NEAR(exp.lr(10), 0.9043820750088044, 1e-15);

  LrPolicy inv = make({{"name", "inv"}, {"gamma", 1e-4}, {"power", 0.75}}, 0.01);
  EXPECT_DOUBLE_EQ(inv.lr(0), 0.01);
  EXPECT_NEAR(inv.lr(10000), 0.005946035575013605, 1e-17);  // 0.01 * 2^-0.75

  LrPolicy poly = make({{"name", "poly"}, {"power", 2}, {"max_steps", 100}}, 0.1);
  EXPECT_DOUBLE_EQ(poly.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(poly.lr(50), 0.025);
  EXPECT_DOUBLE_EQ(poly.lr(100), 0.0);
  EXPECT_DOUBLE_EQ(poly.lr(150), 0.0);

  LrPolicy sigmoid = make({{"name", "sigmoid"}, {"gamma", 0.1}, {"step_size", 50}}, 1.0);
  EXPECT_DOUBLE_EQ(sigmoid.lr(50), 0.5);
  EXPECT_NEAR(sigmoid.lr(60), 0.7310585786300049, 1e-15);  // 1 / (1 + e^-1)
  EXPECT_NEAR(sigmoid.lr(40), 1 - 0.7310585786300049, 1e-15);

  LrPolicy cosine = make({{"name", "cosine"}, {"min_lr", 0.1}, {"max_steps", 100}}, 1.0);
  EXPECT_DOUBLE_EQ(cosine.lr(0), 1.0);
  EXPECT_NEAR(cosine.lr(25), 0.8681980515339464, 1e-15);
  EXPECT_NEAR(cosine.lr(30), 0.814503363531613, 1e-15);
  EXPECT_NEAR(cosine.lr(50), 0.55, 1e-15);
  EXPECT_NEAR(cosine.lr(100), 0.1, 1e-15);
  EXPECT_NEAR(cosine.lr(200), 0.1, 1e-15);
}

TEST(LrPolicy, WarmUpScalesThePolicy) {
  LrPolicy fixed = make({{"name", "fixed"}, {"warmup_steps", 4}}, 1.0);
  EXPECT_DOUBLE_EQ(fixed.lr(0), 0.2);
  EXPECT_DOUBLE_EQ(fixed.lr(3), 0.8);
  EXPECT_DOUBLE_EQ(fixed.lr(4), 1.0);
  EXPECT_DOUBLE_EQ(fixed.lr(-3), 0.2);

  LrPolicy from = make({{"name", "fixed"}, {"warmup_steps", 4}, {"warmup_init_lr", 0.1}}, 1.0);
  EXPECT_DOUBLE_EQ(from.lr(0), 0.1 + 0.9 * 0.2);

  // The policy runs on the absolute step; warm-up scales its value.
  LrPolicy step = make({{"name", "step"}, {"step_size", 2}, {"gamma", 0.5}, {"warmup_steps", 3}}, 1.0);
  EXPECT_DOUBLE_EQ(step.lr(1), 0.5);         // 1 * 2/4
  EXPECT_DOUBLE_EQ(step.lr(2), 0.5 * 0.75);  // 0.5 * 3/4
  EXPECT_DOUBLE_EQ(step.lr(3), 0.5);
}

TEST(LrPolicy, LengthFromTheRun) {
  LrPolicy cosine = make({{"name", "cosine"}}, 1.0, 1000);
  EXPECT_EQ(cosine.options().max_steps, 1000);
  EXPECT_NEAR(cosine.lr(500), 0.5, 1e-15);
  LrPolicy poly = make({{"name", "poly"}, {"max_steps", 10}}, 1.0, 1000);
  EXPECT_EQ(poly.options().max_steps, 10);
  LrPolicy base = make({{"name", "fixed"}, {"base_lr", 0.5}}, 1.0);
  EXPECT_DOUBLE_EQ(base.lr(7), 0.5);
}

TEST(LrPolicy, CurveForThePlot) {
  LrPolicy step = make({{"name", "step"}, {"gamma", 0.1}, {"step_size", 300}}, 0.01);
  auto curve = step.curve(1000, 11);
  ASSERT_FALSE(curve.empty());
  EXPECT_EQ(curve.front().first, 0);
  EXPECT_EQ(curve.back().first, 999);
  for (size_t i = 1; i < curve.size(); ++i) EXPECT_LT(curve[i - 1].first, curve[i].first);
  for (const auto& [s, lr] : curve) EXPECT_DOUBLE_EQ(lr, step.lr(s));
  auto has = [&](int64_t s) {
    return std::any_of(curve.begin(), curve.end(), [&](const auto& p) { return p.first == s; });
  };
  // Both sides of each decay, so the plot shows steps rather than slopes.
  for (int64_t s : {299, 300, 599, 600, 899, 900}) EXPECT_TRUE(has(s)) << s;
  EXPECT_EQ(curve.size(), 14u);  // 11 evenly spaced (300, 599 and 899 among them) and the other 3 jump sides

  auto every = make({{"name", "exp"}, {"gamma", 0.9}}, 1.0).curve(5, 100);
  ASSERT_EQ(every.size(), 5u);
  EXPECT_EQ(every[4].first, 4);
  EXPECT_DOUBLE_EQ(every[1].second, 0.9);
  EXPECT_TRUE(step.curve(0).empty());
}

TEST(LrPolicy, ConfigErrorsNameTheKey) {
  struct Bad {
    OptionMap config;
    int64_t total_steps;
    std::vector<std::string> parts;
  };
  const std::vector<Bad> bad = {
      {{{"name", "stepp"}}, 0, {"lr_policy.name: unknown learning-rate policy 'stepp'", "did you mean 'step'?"}},
      {{{"gamma", 0.1}}, 0, {"lr_policy.name: missing", "fixed, step, multistep"}},
      {{{"name", "step"}, {"gamma", 0.1}}, 0, {"lr_policy.step_size: missing; the step policy needs it"}},
      {{{"name", "step"}, {"stepsize", 10}}, 0, {"lr_policy.stepsize: unknown key", "did you mean 'step_size'?"}},
      {{{"name", "step"}, {"step_size", 0}}, 0, {"lr_policy.step_size: 0 must be > 0"}},
      {{{"name", "step"}, {"step_size", 2.5}}, 0, {"lr_policy.step_size: expected a whole number, got 2.5"}},
      {{{"name", "multistep"}, {"steps", {30, 10}}}, 0, {"lr_policy.steps: the steps must increase"}},
      {{{"name", "exp"}, {"gamma", -1}}, 0, {"lr_policy.gamma: -1 must be > 0 for exp"}},
      {{{"name", "inv"}, {"gamma", 0.1}}, 0, {"lr_policy.power: missing"}},
      {{{"name", "cosine"}}, 0, {"lr_policy.max_steps: missing", "number of epochs"}},
      {{{"name", "fixed"}, {"gamma", 0.1}}, 0, {"lr_policy.gamma: unknown key for learning-rate policy 'fixed'"}},
      {{{"name", "fixed"}, {"warmup_steps", -5}}, 0, {"lr_policy.warmup_steps: -5 must be >= 0"}},
  };
  for (const Bad& b : bad) {
    auto r = LrPolicy::create(b.config, 0.1, b.total_steps);
    ASSERT_FALSE(r.is_ok());
    for (const std::string& part : b.parts)
      EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message() << "\n  lacks: " << part;
  }
  // Command-line strings convert.
  auto ok = LrPolicy::create({{"name", "multistep"}, {"steps", "[100, 200]"}, {"gamma", "0.5"}}, 1.0);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_DOUBLE_EQ(ok->lr(150), 0.5);
  EXPECT_EQ(lr_policy_name(LrPolicyKind::kCosine), "cosine");
}

}  // namespace
}  // namespace kiln::train
