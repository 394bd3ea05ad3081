// Loss-scaled optimizer steps (StepOptions: grad_scale, skip_nonfinite), unscale_grads, the parameter device checks
// and DynamicLossScaler (torch.cuda.amp.GradScaler's semantics), on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "optim_cases.h"
#include "train/optim/gradients.h"
#include "train/optim/loss_scaler.h"
#include "train/optim/optimizer.h"

namespace kiln::train {
namespace {

using namespace optim_testing;  // NOLINT(google-build-using-namespace): the problem of optim_cases.h

constexpr float kInf = std::numeric_limits<float>::infinity();

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_same_state(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, value] : want) {
    ASSERT_EQ(got.count(key), 1u) << what << " " << key;
    EXPECT_TRUE(same_bits(got.at(key), value)) << what << " " << key;
  }
}

TEST(ScaledStep, NonfiniteGradsSkipTheStepWithoutChangingAnything) {
  for (const Case& c : cases()) {
    for (int where = 0; where < 2; ++where) {
      Problem problem;
      auto opt = create(c.config, problem);
      ASSERT_TRUE(opt);
      run_steps(*opt, problem, 2);
      auto before = opt->export_state().value();
      std::vector<float> values = problem.values();

      problem.compute_grads();
      if (where == 0) {
        problem.gw.data<float>()[4] = kInf;
      } else {
        problem.gb.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
      }
      auto updated = opt->step({1.0, true});
      ASSERT_TRUE(updated.is_ok()) << c.name << ": " << updated.status().to_string();
      EXPECT_FALSE(*updated) << c.name;
      EXPECT_EQ(problem.values(), values) << c.name;
      EXPECT_EQ(opt->steps(0), 2) << c.name;
      EXPECT_EQ(opt->steps(1), 2) << c.name;
      expect_same_state(opt->export_state().value(), before, c.name);

      // The next good step is the third.
      problem.compute_grads();
      updated = opt->step({1.0, true});
      ASSERT_TRUE(updated.is_ok());
      EXPECT_TRUE(*updated) << c.name;
      EXPECT_EQ(opt->steps(0), 3) << c.name;
    }
  }
}

TEST(ScaledStep, SkippedStepsLeaveTheTrajectoryOfTheGoodOnes) {
  // Good, skipped, good, good, good: the same result as four good steps.
  for (const Case& c : cases()) {
    Problem straight, skipping;
    auto a = create(c.config, straight);
    auto b = create(c.config, skipping);
    run_steps(*a, straight, 4);
    run_steps(*b, skipping, 1);
    skipping.compute_grads();
    skipping.gb.data<float>()[0] = -kInf;
    EXPECT_FALSE(b->step({4.0, true}).value()) << c.name;
    run_steps(*b, skipping, 3);
    std::vector<float> got = skipping.values(), want = straight.values();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name;
  }
}

TEST(ScaledStep, ScaledGradsGiveTheUnscaledUpdate) {
  for (const Case& c : cases()) {
    for (double scale : {1024.0, 65536.0, 1000.0}) {
      Problem plain, scaled;
      auto a = create(c.config, plain);
      auto b = create(c.config, scaled);
      for (int s = 0; s < 5; ++s) {
        plain.compute_grads();
        ASSERT_TRUE(a->step().is_ok());
        scaled.compute_grads();
        for (Tensor* g : {&scaled.gw, &scaled.gb})
          for (int64_t i = 0; i < g->numel(); ++i) g->data<float>()[i] *= static_cast<float>(scale);
        auto updated = b->step({scale, s % 2 == 0});
        ASSERT_TRUE(updated.is_ok()) << updated.status().to_string();
        EXPECT_TRUE(*updated);
      }
      std::vector<float> got = scaled.values(), want = plain.values();
      if (scale == 1000.0) {
        // 1/1000 is not exact in float: the grads differ by an ulp or so.
        expect_close(got, want, c.name);
      } else {
        // A power of two scales and unscales exactly.
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name << " " << scale;
      }
    }
  }
}

TEST(ScaledStep, UnscalesInPlaceAndChecksTheScale) {
  Problem problem;
  problem.compute_grads();
  std::vector<float> g = problem.grads();
  std::vector<Parameter> params = problem.params();
  for (Tensor* t : {&problem.gw, &problem.gb})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] *= 8.0f;
  auto found = unscale_grads(params, 8.0);
  ASSERT_TRUE(found.is_ok());
  EXPECT_FALSE(*found);
  EXPECT_EQ(problem.grads(), g);
  // Overflow of a finite grad by the unscaling counts as non-finite.
  problem.gw.data<float>()[0] = 3e38f;
  EXPECT_TRUE(unscale_grads(params, 0.5).value());

  auto opt = create({{"name", "adam"}}, problem);
  for (double bad : {0.0, -2.0, static_cast<double>(kInf), std::nan("")}) {
    auto r = opt->step({bad, true});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("grad_scale"), std::string::npos) << r.status().message();
    EXPECT_FALSE(unscale_grads(params, bad).is_ok());
  }
}

TEST(ScaledStep, SkipComesBeforeClipping) {
  // With clip_grad_norm an inf grad is an error (the norm is inf), unless the step skips it first.
  Problem problem;
  auto opt = create({{"name", "sgd"}, {"lr", 0.1}, {"clip_grad_norm", 0.5}}, problem);
  problem.compute_grads();
  problem.gw.data<float>()[0] = kInf;
  auto r = opt->step({2.0, true});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(*r);
  EXPECT_EQ(problem.values(), Problem().values());
  problem.compute_grads();
  problem.gw.data<float>()[0] = kInf;
  EXPECT_FALSE(opt->step().is_ok());
}

TEST(ScaledStep, ParametersOnMixedDevicesAreRejected) {
  // Device tensors as views (no memory is touched: check_parameters reads only where they live).
  Problem problem;
  std::vector<Parameter> params = problem.params();
  float fake = 0;
  params[1].value = Tensor::view(&fake, DataType::kFloat32, {3}, Device::cuda(0));
  params[1].grad = Tensor::view(&fake, DataType::kFloat32, {3}, Device::cuda(0));
  Status st = check_parameters(params);
  EXPECT_NE(st.message().find("parameter 'b' is on cuda:0 but parameter 'w' is on cpu"), std::string::npos)
      << st.message();
  EXPECT_FALSE(Optimizer::create(AdamOptions(), params).is_ok());

  params = problem.params();
  params[0].grad = Tensor::view(&fake, DataType::kFloat32, {2, 3}, Device::cuda(0));
  st = check_parameters(params);
  EXPECT_NE(st.message().find("the gradient of 'w' is on cuda:0 but the parameter is on cpu"), std::string::npos)
      << st.message();

  params = problem.params();
  for (Parameter& p : params) {
    p.value = Tensor::view(&fake, DataType::kFloat32, p.value.dims(), Device::cuda(0));
    p.grad = Tensor::view(&fake, DataType::kFloat32, p.value.dims(), Device::cuda(1));
  }
  st = check_parameters(params);
  EXPECT_NE(st.message().find("the gradient of 'w' is on cuda:1 but the parameter is on cuda:0"), std::string::npos)
      << st.message();
}

TEST(LossScaler, GrowsAfterTheIntervalAndBacksOffOnOverflow) {
  auto scaler = DynamicLossScaler::create().value();
  EXPECT_EQ(scaler.scale(), 65536.0f);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.good_steps(), 1999);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 131072.0f);
  EXPECT_EQ(scaler.good_steps(), 0);
  for (int i = 0; i < 10; ++i) scaler.update(false);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.good_steps(), 0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 32768.0f);
}

TEST(LossScaler, StaysWithinItsBounds) {
  LossScalerOptions o;
  o.init_scale = 4;
  o.min_scale = 1;
  o.max_scale = 16;
  o.growth_interval = 1;
  o.backoff_factor = 0.25;
  auto scaler = DynamicLossScaler::create(o).value();
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1.0f);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1.0f);
  for (int i = 0; i < 10; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16.0f);
}

TEST(LossScaler, StateRoundTrips) {
  LossScalerOptions o;
  o.growth_interval = 3;
  auto a = DynamicLossScaler::create(o).value();
  a.update(true);
  a.update(false);
  a.update(false);
  auto state = a.export_state().value();
  auto b = DynamicLossScaler::create(o).value();
  ASSERT_TRUE(b.import_state(state).is_ok());
  EXPECT_EQ(b.scale(), 32768.0f);
  EXPECT_EQ(b.good_steps(), 2);
  a.update(false);
  b.update(false);
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_EQ(b.scale(), 65536.0f);
  EXPECT_EQ(b.good_steps(), 0);

  state.erase("loss_scaler.good_steps");
  Status st = b.import_state(state);
  EXPECT_NE(st.message().find("'loss_scaler.good_steps'"), std::string::npos) << st.message();
  state = a.export_state().value();
  state["loss_scaler.scale"] = Tensor::zeros(DataType::kFloat32, {}).value();
  st = b.import_state(state);
  EXPECT_NE(st.message().find("must be finite and > 0"), std::string::npos) << st.message();
}

TEST(LossScaler, RejectsBadOptions) {
  LossScalerOptions o;
  o.growth_factor = 1;
  auto r = DynamicLossScaler::create(o, "amp");
  EXPECT_NE(r.status().message().find("amp.growth_factor is 1"), std::string::npos) << r.status().message();
  o = {};
  o.backoff_factor = 1;
  EXPECT_FALSE(DynamicLossScaler::create(o).is_ok());
  o = {};
  o.growth_interval = 0;
  EXPECT_FALSE(DynamicLossScaler::create(o).is_ok());
  o = {};
  o.init_scale = 1e9;
  r = DynamicLossScaler::create(o);
  EXPECT_NE(r.status().message().find("loss_scaler.init_scale"), std::string::npos) << r.status().message();
  o = {};
  o.min_scale = 0;
  EXPECT_FALSE(DynamicLossScaler::create(o).is_ok());
}

}  // namespace
}  // namespace kiln::train
