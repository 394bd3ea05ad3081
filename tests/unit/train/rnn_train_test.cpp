// A small LSTM classifier trains on the CPU: its training graph (LSTM -> MSELoss of the last hidden state against
// +-0.5 class codes) builds, runs, and SGD lowers the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/loss/loss.h"
#include "ops/rnn/rnn.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"

namespace kiln::train {
namespace {

Tensor random_tensor(Dims dims, std::mt19937& rng, float range) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::uniform_real_distribution<float> u(-range, range);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

TEST(RnnTraining, LstmClassifierLossDecreasesWithSgd) {
  constexpr int64_t kSeq = 6, kBatch = 8, kInput = 2, kHidden = 4;
  std::mt19937 rng(7);
  // Class of a sequence: the sign of its first feature's sum; target code +-0.5 in every hidden unit.
  Tensor x = random_tensor({kSeq, kBatch, kInput}, rng, 1.f);
  Tensor target = Tensor::empty(DataType::kFloat32, {1, kBatch, kHidden}).value();
  for (int64_t b = 0; b < kBatch; ++b) {
    float sum = 0.f;
    for (int64_t t = 0; t < kSeq; ++t) sum += x.data<float>()[(t * kBatch + b) * kInput];
    for (int64_t j = 0; j < kHidden; ++j) target.data<float>()[b * kHidden + j] = sum > 0.f ? 0.5f : -0.5f;
  }
  Graph g;
  Value* xv = g.add_constant("x", x).value();
  Value* w = g.add_constant("W", random_tensor({1, 4 * kHidden, kInput}, rng, 0.5f)).value();
  Value* r = g.add_constant("R", random_tensor({1, 4 * kHidden, kHidden}, rng, 0.5f)).value();
  Value* bias = g.add_constant("B", random_tensor({1, 8 * kHidden}, rng, 0.1f)).value();
  Value* tv = g.add_constant("target", target).value();
  auto lstm = g.add_node("LSTM", "lstm", std::make_unique<LstmAttrs>(), {xv, w, r, bias});
  ASSERT_TRUE(lstm.is_ok()) << lstm.status().to_string();
  auto loss = g.add_node("MSELoss", "mse", std::make_unique<LossAttrs>(), {(*lstm)->outputs[1], tv}, {"loss"});
  ASSERT_TRUE(loss.is_ok()) << loss.status().to_string();

  AutogradOptions options;
  options.params = {"W", "R", "B"};
  auto tg = build_training_graph(g, "loss", options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();
  BuildOptions build;
  build.backend = Backend::kCpu;
  auto runner = GraphRunner::compile(*tg->graph, build);
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  std::vector<Tensor> params;
  for (const std::string& p : tg->params) params.push_back(tg->initial.at(p).clone().value());

  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    for (size_t i = 0; i < params.size(); ++i) ASSERT_TRUE(runner->set_input(tg->params[i], params[i]).is_ok());
    const Status ran = runner->run();
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    losses.push_back(runner->output("loss")->at(0));
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor grad = runner->output(tg->grads[i]).value();
      ASSERT_EQ(grad.numel(), params[i].numel());
      for (int64_t k = 0; k < grad.numel(); ++k) params[i].data<float>()[k] -= 1.f * static_cast<float>(grad.at(k));
    }
  }
  ASSERT_TRUE(std::isfinite(losses.back()));
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "first loss " << losses.front() << ", last " << losses.back();
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LE(losses[i], losses[i - 1] * 1.05) << "step " << i;
}

}  // namespace
}  // namespace kiln::train
