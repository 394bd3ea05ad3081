// Optimizers: each against PyTorch's on a few steps of a small problem, clipping, gradient accumulation,
// state export/import (a resumed optimizer continues bit-exactly), the vectorized path on large tensors and
// config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "optim_cases.h"
#include "train/optim/gradients.h"
#include "train/optim/optimizer.h"

namespace kiln::train {
namespace {

using namespace optim_testing;  // NOLINT(google-build-using-namespace): the problem of optim_cases.h

TEST(Optimizer, MatchesPyTorch) {
  for (const Case& c : cases()) {
    Problem problem;
    auto opt = create(c.config, problem);
    ASSERT_TRUE(opt);
    run_steps(*opt, problem, 5);
    expect_close(problem.values(), c.expected, c.name);
    EXPECT_EQ(opt->steps(0), 5) << c.name;
  }
}

TEST(Optimizer, ResumedFromExportedStateContinuesBitExactly) {
  for (const Case& c : cases()) {
    Problem straight;
    auto a = create(c.config, straight);
    ASSERT_TRUE(a);
    run_steps(*a, straight, 5);

    Problem first;
    auto b = create(c.config, first);
    ASSERT_TRUE(b);
    run_steps(*b, first, 3);
    auto state = b->export_state();
    ASSERT_TRUE(state.is_ok()) << state.status().to_string();
    run_steps(*b, first, 1);  // later steps must not change what was exported
    EXPECT_EQ(state->count("w.step"), 1u) << c.name;

    // A new optimizer over copies of the weights after 3 steps (as a checkpoint would restore them).
    Problem resumed;
    Problem replay;
    auto r = create(c.config, replay);
    ASSERT_TRUE(r);
    run_steps(*r, replay, 3);
    std::memcpy(resumed.w.raw(), replay.w.raw(), replay.w.nbytes());
    std::memcpy(resumed.b.raw(), replay.b.raw(), replay.b.nbytes());
    auto d = create(c.config, resumed);
    ASSERT_TRUE(d);
    Status st = d->import_state(*state);
    ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
    run_steps(*d, resumed, 2);
    std::vector<float> got = resumed.values(), want = straight.values();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name;
    EXPECT_EQ(d->steps(1), 5) << c.name;
  }
}

TEST(Optimizer, StateNamesFollowPyTorch) {
  Problem problem;
  auto adam = create({{"name", "adam"}, {"amsgrad", true}}, problem);
  auto state = adam->export_state().value();
  for (const char* key : {"w.step", "w.exp_avg", "w.exp_avg_sq", "w.max_exp_avg_sq", "b.exp_avg"})
    EXPECT_EQ(state.count(key), 1u) << key;
  EXPECT_EQ(state.at("w.exp_avg").dims(), (Dims{2, 3}));
  EXPECT_EQ(state.at("w.step").dtype(), DataType::kInt64);
  auto novograd = create({{"name", "novograd"}}, problem);
  state = novograd->export_state().value();
  EXPECT_EQ(state.at("b.exp_avg_sq").rank(), 0);
  auto sgd = create({{"name", "momentum"}}, problem);
  EXPECT_EQ(sgd->export_state()->count("w.momentum_buffer"), 1u);
}

TEST(Optimizer, ImportRejectsStateOfAnotherOptimizerOrShape) {
  Problem problem;
  auto adam = create({{"name", "adam"}}, problem);
  auto sgd = create({{"name", "momentum"}}, problem);
  auto sgd_state = sgd->export_state().value();
  Status st = adam->import_state(sgd_state);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'w.exp_avg'"), std::string::npos) << st.message();

  auto state = adam->export_state().value();
  state["w.exp_avg"] = Tensor::zeros(DataType::kFloat32, {3, 2}).value();
  st = adam->import_state(state);
  EXPECT_NE(st.message().find("w.exp_avg"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2, 3]"), std::string::npos) << st.message();

  state = adam->export_state().value();
  state["v.exp_avg"] = Tensor::zeros(DataType::kFloat32, {3}).value();
  st = adam->import_state(state);
  EXPECT_NE(st.message().find("'v.exp_avg'"), std::string::npos) << st.message();
}

TEST(Optimizer, TypedOptionsEqualTheConfig) {
  Problem from_config, typed;
  auto a =
      create({{"name", "rmsprop"}, {"lr", 0.01}, {"alpha", 0.9}, {"momentum", 0.5}, {"centered", true}}, from_config);
  RmspropOptions o;
  o.lr = 0.01;
  o.alpha = 0.9;
  o.momentum = 0.5;
  o.centered = true;
  auto b = Optimizer::create(o, typed.params());
  ASSERT_TRUE(b.is_ok());
  run_steps(*a, from_config, 3);
  run_steps(**b, typed, 3);
  EXPECT_EQ(from_config.values(), typed.values());
  EXPECT_EQ((*b)->name(), "rmsprop");
}

TEST(Optimizer, DecoupledWeightDecay) {
  // Adam with decoupled weight decay is AdamW.
  Problem adam, adamw;
  auto a = create({{"name", "adam"}, {"lr", 0.01}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}}, adam);
  auto w = create({{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}}, adamw);
  run_steps(*a, adam, 4);
  run_steps(*w, adamw, 4);
  EXPECT_EQ(adam.values(), adamw.values());

  // SGD: p <- p * (1 - lr * wd) - lr * g.
  Problem sgd;
  auto s = create({{"name", "sgd"}, {"lr", 0.1}, {"weight_decay", 0.5}, {"decoupled_weight_decay", "true"}}, sgd);
  sgd.compute_grads();
  std::vector<float> p0 = sgd.values(), g = sgd.grads();
  ASSERT_TRUE(s->step().is_ok());
  std::vector<float> p1 = sgd.values();
  for (size_t i = 0; i < p0.size(); ++i) EXPECT_FLOAT_EQ(p1[i], p0[i] * 0.95f - 0.1f * g[i]) << i;
}

TEST(Optimizer, LearningRateIsSetBetweenSteps) {
  Problem problem;
  auto sgd = create({{"name", "sgd"}, {"lr", 0.1}}, problem);
  sgd->set_lr(0.0);
  run_steps(*sgd, problem, 1);
  EXPECT_EQ(problem.values(), Problem().values());
  sgd->set_lr(0.5);
  problem.compute_grads();
  std::vector<float> p0 = problem.values(), g = problem.grads();
  ASSERT_TRUE(sgd->step().is_ok());
  EXPECT_FLOAT_EQ(problem.values()[0], p0[0] - 0.5f * g[0]);
}

TEST(Optimizer, ParameterWithoutGradIsSkipped) {
  Problem problem;
  std::vector<Parameter> params = problem.params();
  params[1].grad = Tensor();
  auto opt = Optimizer::create(AdamOptions(), params).value();
  run_steps(*opt, problem, 2);
  EXPECT_EQ(read(problem.b), kB0);
  EXPECT_NE(read(problem.w), kW0);
  EXPECT_EQ(opt->steps(0), 2);
  EXPECT_EQ(opt->steps(1), 0);
}

// Large tensors go through the chunked, threaded path: every element must get the same update as in the
// small problem (the rules are elementwise), bit for bit, whatever the chunk it falls in.
TEST(Optimizer, LargeTensorsMatchTheSmallProblemElementwise) {
  const int64_t n = int64_t{6} * 20011;  // several chunks, not a multiple of the chunk size
  for (const char* name : {"adam", "rmsprop", "nesterov", "adagrad", "adadelta"}) {
    OptionMap config = {{"name", name}, {"lr", 0.01}, {"weight_decay", 0.01}};
    Problem small;
    auto a = create(config, small);
    run_steps(*a, small, 3);

    Tensor big = Tensor::empty(DataType::kFloat32, {n}).value();
    Tensor grad = Tensor::empty(DataType::kFloat32, {n}).value();
    for (int64_t i = 0; i < n; ++i) big.data<float>()[i] = kW0[i % 6];
    auto b = Optimizer::create(config, {{"big", big, grad}}).value();
    for (int s = 0; s < 3; ++s) {
      for (int64_t i = 0; i < n; ++i) {
        float p = big.data<float>()[i];
        grad.data<float>()[i] = kAW[i % 6] * (p - kTW[i % 6]) + std::cos(p);
      }
      ASSERT_TRUE(b->step().is_ok());
    }
    std::vector<float> want = read(small.w);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) mismatches += big.data<float>()[i] != want[i % 6];
    EXPECT_EQ(mismatches, 0) << name;
  }
}

TEST(Optimizer, EmptyParametersAreFine) {
  for (std::string_view name : optimizer_names()) {
    Tensor v = Tensor::zeros(DataType::kFloat32, {0, 4}).value(), g = Tensor::zeros(DataType::kFloat32, {0, 4}).value();
    OptionMap config = {{"name", std::string(name)}};
    if (name == "novograd") config.emplace("luc", true);
    auto opt = Optimizer::create(config, {{"e", v, g}});
    ASSERT_TRUE(opt.is_ok()) << opt.status().to_string();
    EXPECT_TRUE((*opt)->step().is_ok()) << name;
    auto state = (*opt)->export_state();
    ASSERT_TRUE(state.is_ok());
    EXPECT_TRUE((*opt)->import_state(*state).is_ok()) << name;
  }
  auto none = Optimizer::create(AdamOptions(), {});
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE((*none)->step().is_ok());
}

TEST(Optimizer, RejectsBadParameters) {
  Problem problem;
  std::vector<Parameter> params = problem.params();
  params[1].name = "w";
  auto r = Optimizer::create(SgdOptions(), params);
  EXPECT_NE(r.status().message().find("'w' is listed twice"), std::string::npos) << r.status().message();

  params = problem.params();
  params[0].grad = Tensor::zeros(DataType::kFloat32, {6}).value();
  r = Optimizer::create(SgdOptions(), params);
  EXPECT_NE(r.status().message().find("gradient of 'w' has dims [6]"), std::string::npos) << r.status().message();

  params = problem.params();
  params[0].value = Tensor::zeros(DataType::kFloat16, {2, 3}).value();
  r = Optimizer::create(SgdOptions(), params);
  EXPECT_NE(r.status().message().find("parameter 'w' is float16"), std::string::npos) << r.status().message();

  auto opt = Optimizer::create(SgdOptions(), problem.params()).value();
  opt->params()[0].value = Tensor::zeros(DataType::kFloat32, {3, 2}).value();
  opt->params()[0].grad = Tensor::zeros(DataType::kFloat32, {3, 2}).value();
  Status st = opt->step();
  EXPECT_NE(st.message().find("'w' changed dims from [2, 3] to [3, 2]"), std::string::npos) << st.message();

  opt->params().push_back({"extra", problem.b, problem.gb});
  EXPECT_NE(opt->step().message().find("created for 2 parameters but now has 3"), std::string::npos);
  EXPECT_FALSE(opt->export_state().is_ok());
}

struct BadConfig {
  OptionMap config;
  std::vector<std::string> message_parts;
};

TEST(Optimizer, ConfigErrorsNameTheKey) {
  const std::vector<BadConfig> bad = {
      {{{"name", "adam"}, {"beta", {0.9, 0.999}}},
       {"optim.beta: unknown key for optimizer 'adam'", "did you mean 'betas'?", "known keys: lr,"}},
      {{{"name", "adam"}, {"lr", "fast"}}, {"optim.lr: expected a number, got 'fast'"}},
      {{{"name", "adam"}, {"betas", {0.9}}}, {"optim.betas: expected a list of two numbers, got [0.9]"}},
      {{{"name", "adam"}, {"betas", {1.5, 0.9}}}, {"optim.betas: beta1 = 1.5 must be in [0, 1)"}},
      {{{"name", "adam"}, {"amsgrad", 1}}, {"optim.amsgrad: expected true or false"}},
      {{{"name", "sgd"}, {"lr", -1}}, {"optim.lr: -1 must be >= 0"}},
      {{{"name", "adamm"}}, {"optim.name: unknown optimizer 'adamm'", "did you mean 'adam'?", "novograd"}},
      {{{"name", "sgd"}, {"luc", true}}, {"optim.luc: unknown key for optimizer 'sgd' (known keys: lr,"}},
      {{{"lr", 0.1}}, {"optim.name: missing"}},
      {{{"name", 3}}, {"optim.name: expected an optimizer name"}},
      {{{"name", "momentum"}, {"momentum", 0}}, {"optim.momentum", "needs momentum > 0"}},
      {{{"name", "sgd"}, {"nesterov", true}}, {"optim.nesterov: Nesterov momentum needs momentum > 0"}},
      {{{"name", "nesterov"}, {"nesterov", false}}, {"optim.nesterov: unknown key for optimizer 'nesterov'"}},
      {{{"name", "adamw"}, {"decoupled_weight_decay", false}}, {"optim.decoupled_weight_decay: unknown key"}},
      {{{"name", "novograd"}, {"decoupled_weight_decay", true}}, {"optim.decoupled_weight_decay: unknown key"}},
      {{{"name", "adadelta"}, {"rho", 2}}, {"optim.rho: 2 must be in [0, 1]"}},
      {{{"name", "rmsprop"}, {"eps", "1e-8x"}}, {"optim.eps: expected a number, got '1e-8x'"}},
  };
  Problem problem;
  for (const BadConfig& b : bad) {
    auto r = Optimizer::create(b.config, problem.params());
    ASSERT_FALSE(r.is_ok());
    for (const std::string& part : b.message_parts)
      EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message() << "\n  lacks: " << part;
  }
  // Typed options are checked too, with the same key names.
  AdamWOptions w;
  w.decoupled_weight_decay = false;
  EXPECT_NE(validate(w).message().find("AdamW's weight decay is always decoupled"), std::string::npos);
}

TEST(Optimizer, ConfigFromCommandLineStrings) {
  auto options = parse_optimizer_options(
      {{"name", "adam"}, {"lr", "0.01"}, {"betas", "[0.8, 0.99]"}, {"amsgrad", "true"}, {"weight_decay", "0"}});
  ASSERT_TRUE(options.is_ok()) << options.status().to_string();
  const auto& adam = std::get<AdamOptions>(*options);
  EXPECT_EQ(adam.lr, 0.01);
  EXPECT_EQ(adam.beta1, 0.8);
  EXPECT_EQ(adam.beta2, 0.99);
  EXPECT_TRUE(adam.amsgrad);
  auto sgd = parse_optimizer_options("nesterov", {{"lr", 0.2}});
  ASSERT_TRUE(sgd.is_ok());
  EXPECT_TRUE(std::get<SgdOptions>(*sgd).nesterov);
  EXPECT_EQ(std::get<SgdOptions>(*sgd).momentum, 0.9);
  EXPECT_EQ(optimizer_names().size(), 9u);
}

TEST(GradientClipping, ByGlobalNormAsPyTorch) {
  // torch.nn.utils.clip_grad_norm_ on the problem's first gradients (optim_reference.py).
  Problem problem;
  problem.compute_grads();
  std::vector<Parameter> params = problem.params();
  auto total = clip_grad_norm(params, 1.0);
  ASSERT_TRUE(total.is_ok());
  EXPECT_NEAR(*total, 5.75973129, 1e-5);
  expect_close(problem.grads(),
               {0.221812829f, -0.423221499f, 0.217950493f, 0.448606491f, 0.102407917f, 0.0685802996f, 0.0909330994f,
                0.65199846f, 0.272710115f},
               "L2");

  problem.compute_grads();
  total = clip_grad_norm(params, 0.5, std::numeric_limits<double>::infinity());
  EXPECT_NEAR(*total, 3.75533652, 1e-6);
  expect_close(problem.grads(),
               {0.170102224f, -0.324557066f, 0.167140305f, 0.344024122f, 0.0785338506f, 0.0525923632f, 0.0697341189f,
                0.499999881f, 0.209133968f},
               "inf");

  // Under the bound nothing changes.
  problem.compute_grads();
  std::vector<float> before = problem.grads();
  total = clip_grad_norm(params, 100.0);
  EXPECT_EQ(problem.grads(), before);

  // A non-finite norm is an error that says what happened, and the grads are left alone.
  problem.gw.data<float>()[2] = std::numeric_limits<float>::infinity();
  total = clip_grad_norm(params, 1.0);
  EXPECT_NE(total.status().message().find("norm is inf: training diverged"), std::string::npos)
      << total.status().message();
  EXPECT_FALSE(clip_grad_norm(params, 0.0).is_ok());
}

TEST(GradientClipping, ByValueAsPyTorch) {
  Problem problem;
  problem.compute_grads();
  std::vector<Parameter> params = problem.params();
  ASSERT_TRUE(clip_grad_value(params, 0.4).is_ok());
  expect_close(problem.grads(),
               {0.400000006f, -0.400000006f, 0.400000006f, 0.400000006f, 0.400000006f, 0.395004153f, 0.400000006f,
                0.400000006f, 0.400000006f},
               "value");
  EXPECT_FALSE(clip_grad_value(params, -1).is_ok());
}

TEST(GradientClipping, LargeNormIsDeterministicAndExact) {
  const int64_t n = 100003;
  Tensor v = Tensor::zeros(DataType::kFloat32, {n}).value();
  Tensor g = Tensor::empty(DataType::kFloat32, {n}).value();
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    g.data<float>()[i] = static_cast<float>((i % 7) - 3) * 0.25f;
    want += static_cast<double>(g.data<float>()[i]) * g.data<float>()[i];
  }
  std::vector<Parameter> params = {{"v", v, g}};
  EXPECT_NEAR(grad_norm(params).value(), std::sqrt(want), 1e-9 * std::sqrt(want));
  EXPECT_EQ(grad_norm(params, std::numeric_limits<double>::infinity()).value(), 0.75);
  EXPECT_NEAR(grad_norm(params, 1.0).value(), 0.25 * 12 / 7.0 * n, 1.0);
}

TEST(GradAccumulator, AveragesMicroBatches) {
  Problem problem;
  std::vector<Parameter> params = problem.params();
  auto acc = GradAccumulator::create(params, 3).value();
  std::vector<std::vector<float>> grads;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(acc.ready());
    // Each micro-batch sees other weights, so other grads.
    for (int64_t j = 0; j < 6; ++j) problem.w.data<float>()[j] = kW0[j] + 0.1f * i;
    problem.compute_grads();
    grads.push_back(problem.grads());
    ASSERT_TRUE(acc.add(params).is_ok());
  }
  EXPECT_TRUE(acc.ready());
  ASSERT_TRUE(acc.finish(params).is_ok());
  std::vector<float> got = problem.grads();
  for (size_t j = 0; j < got.size(); ++j) EXPECT_EQ(got[j], (grads[0][j] + grads[1][j] + grads[2][j]) / 3.0f) << j;
  EXPECT_EQ(acc.count(), 0);
  EXPECT_FALSE(acc.finish(params).is_ok());  // nothing added since

  auto sum = GradAccumulator::create(params, 2, GradAccumulator::Mode::kSum).value();
  problem.compute_grads();
  std::vector<float> g = problem.grads();
  ASSERT_TRUE(sum.add(params).is_ok());
  ASSERT_TRUE(sum.add(params).is_ok());
  ASSERT_TRUE(sum.finish(params).is_ok());
  for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(problem.grads()[j], g[j] + g[j]);
  EXPECT_FALSE(GradAccumulator::create(params, 0).is_ok());
}

TEST(GradAccumulator, ResumesMidGroup) {
  Problem problem;
  std::vector<Parameter> params = problem.params();
  auto straight = GradAccumulator::create(params, 4).value();
  auto first = GradAccumulator::create(params, 4).value();
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) problem.b.data<float>()[j] = kB0[j] * (1 + 0.3f * i);
    problem.compute_grads();
    ASSERT_TRUE(straight.add(params).is_ok());
    if (i < 2) {
      ASSERT_TRUE(first.add(params).is_ok());
    }
    inputs.push_back(problem.grads());
  }
  ASSERT_TRUE(straight.finish(params).is_ok());
  std::vector<float> want = problem.grads();

  auto state = first.export_state().value();
  auto resumed = GradAccumulator::create(params, 4).value();
  ASSERT_TRUE(resumed.import_state(state).is_ok());
  EXPECT_EQ(resumed.count(), 2);
  for (int i = 2; i < 4; ++i) {
    std::memcpy(problem.gw.raw(), inputs[i].data(), 6 * sizeof(float));
    std::memcpy(problem.gb.raw(), inputs[i].data() + 6, 3 * sizeof(float));
    ASSERT_TRUE(resumed.add(params).is_ok());
  }
  ASSERT_TRUE(resumed.finish(params).is_ok());
  EXPECT_EQ(problem.grads(), want);
}

}  // namespace
}  // namespace kiln::train
