// The gradient rules of the neural-network ops (convolution, pooling, activation, softmax, normalization, dropout)
// against central finite differences, and the CPU backward kernels against the reference ones.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "grad_check.h"
#include "graph/graph.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/dropout/dropout.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"
#include "ops/pooling/pooling.h"
#include "ops/softmax/softmax.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"

namespace kiln::train::testing {
namespace {

template <class A>
std::shared_ptr<const Attrs> share(A a) {
  return std::make_shared<A>(std::move(a));
}

Tensor rnd(const Dims& d, double lo = -1, double hi = 1) {
  static uint32_t seed = 1;
  return random_tensor(d, lo, hi, seed++);
}

TEST(NnGrad, Convolution2dPaddedStridedGroupedDilated) {
  struct Case {
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
    Dims x, w;
  };
  const Case cases[] = {
      {{}, {1, 1, 1, 1}, {}, 1, {2, 3, 5, 5}, {4, 3, 3, 3}},
      {{2, 2}, {1, 0, 0, 1}, {2, 1}, 2, {1, 4, 7, 6}, {6, 2, 3, 2}},
      {{2, 1}, {0, 1, 1, 0}, {}, 3, {1, 3, 6, 5}, {3, 1, 2, 3}},
  };
  for (const Case& k : cases) {
    ConvolutionAttrs a;
    a.strides = k.strides;
    a.pads = k.pads;
    a.dilations = k.dilations;
    a.group = k.group;
    GradCheck c{"Convolution", share(a), {rnd(k.x), rnd(k.w), rnd(Dims{k.w[0]})}, {0, 1, 2}};
    EXPECT_EQ(check_gradients(c), "") << "x " << k.x.to_string() << " w " << k.w.to_string();
  }
}

TEST(NnGrad, Convolution1dAnd3d) {
  ConvolutionAttrs a1;
  a1.strides = {2};
  a1.pads = {1, 1};
  EXPECT_EQ(check_gradients({"Convolution", share(a1), {rnd({2, 3, 9}), rnd({4, 3, 3})}, {0, 1}}), "");
  ConvolutionAttrs a3;
  a3.pads = {1, 0, 0, 0, 1, 0};
  EXPECT_EQ(
      check_gradients({"Convolution", share(a3), {rnd({1, 2, 3, 4, 3}), rnd({2, 2, 2, 2, 2}), rnd({2})}, {0, 1, 2}}),
      "");
}

TEST(NnGrad, Deconvolution) {
  DeconvolutionAttrs a;
  a.strides = {2, 2};
  a.pads = {1, 1, 1, 0};
  a.output_padding = {1, 0};
  a.group = 2;
  EXPECT_EQ(check_gradients({"Deconvolution", share(a), {rnd({1, 4, 3, 3}), rnd({4, 3, 3, 2}), rnd({6})}, {0, 1, 2}}),
            "");
  DeconvolutionAttrs plain;
  plain.dilations = {2};
  EXPECT_EQ(check_gradients({"Deconvolution", share(plain), {rnd({2, 3, 5}), rnd({3, 2, 3})}, {0, 1}}), "");
}

TEST(NnGrad, ConvolutionWithFusedActivationIsRefused) {
  ConvolutionAttrs a;
  a.fused = FusedActivation::from(activation_defaults(ActivationKind::kRelu));
  GradCheck c{"Convolution", share(a), {rnd({1, 2, 4, 4}), rnd({2, 2, 3, 3})}, {0}};
  const std::string msg = check_gradients(c);
  EXPECT_NE(msg.find("fused activation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("before optimizing"), std::string::npos) << msg;
}

TEST(NnGrad, Pooling) {
  auto pool = [](PoolingMode mode, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                 std::vector<int64_t> pads) {
    PoolingAttrs a;
    a.mode = mode;
    a.kernel_shape = std::move(kernel);
    a.strides = std::move(strides);
    a.pads = std::move(pads);
    return a;
  };
  const Dims x{2, 2, 6, 5};
  for (PoolingMode mode : {PoolingMode::kMax, PoolingMode::kAverage, PoolingMode::kLp}) {
    const Tensor in = mode == PoolingMode::kLp ? rnd(x, 0.2, 1.5) : distinct_tensor(x, -1, 0.02, 3);
    EXPECT_EQ(check_gradients({"Pooling", share(pool(mode, {2, 2}, {2, 2}, {})), {in}, {0}}), "") << enum_name(mode);
    PoolingAttrs padded = pool(mode, {3, 3}, {2, 2}, {1, 1, 1, 1});
    padded.ceil_mode = true;
    EXPECT_EQ(check_gradients({"Pooling", share(padded), {in}, {0}}), "") << enum_name(mode) << " padded";
    PoolingAttrs global;
    global.mode = mode;
    global.global = true;
    EXPECT_EQ(check_gradients({"Pooling", share(global), {in}, {0}}), "") << enum_name(mode) << " global";
  }
  PoolingAttrs include = pool(PoolingMode::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1});
  include.count_include_pad = true;
  EXPECT_EQ(check_gradients({"Pooling", share(include), {rnd(x)}, {0}}), "");
  PoolingAttrs indices = pool(PoolingMode::kMax, {3}, {1}, {});
  indices.return_indices = true;
  EXPECT_EQ(check_gradients({"Pooling", share(indices), {distinct_tensor({2, 3, 8}, -1, 0.03, 5)}, {0}}), "");
}

TEST(NnGrad, EveryActivation) {
  for (int k = 0; k <= static_cast<int>(ActivationKind::kCelu); ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    if (kind == ActivationKind::kPRelu) continue;
    ActivationAttrs a = activation_defaults(kind);
    if (kind == ActivationKind::kClip) {
      a.alpha = -0.6f;
      a.beta = 0.8f;
    }
    // Values spaced 0.0497 apart from -2.97: no value sits within the step of a kink (0, +-3, thresholds).
    const Tensor x = distinct_tensor({2, 3, 4, 5}, -2.97, 0.0497, 11);
    EXPECT_EQ(check_gradients({"Activation", share(a), {x}, {0}}), "") << enum_name(kind);
  }
  ActivationAttrs gelu_tanh = activation_defaults(ActivationKind::kGelu);
  gelu_tanh.beta = 1.f;
  EXPECT_EQ(check_gradients({"Activation", share(gelu_tanh), {rnd({40}, -4, 4)}, {0}}), "");
}

TEST(NnGrad, PReluSlope) {
  const ActivationAttrs a = activation_defaults(ActivationKind::kPRelu);
  EXPECT_EQ(check_gradients({"Activation", share(a), {rnd({2, 3, 4, 4}), rnd({3, 1, 1}, 0, 0.5)}, {0, 1}}), "");
  EXPECT_EQ(check_gradients({"Activation", share(a), {rnd({3, 5}), rnd({5}, 0, 0.5)}, {1}}), "");
}

TEST(NnGrad, SoftmaxAndLogSoftmax) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {-1, 1}) {
      SoftmaxAttrs a;
      a.axis = axis;
      EXPECT_EQ(check_gradients({op, share(a), {rnd({3, 4, 5}, -2, 2)}, {0}}), "") << op << " axis " << axis;
    }
    SoftmaxAttrs coerce;
    coerce.axis = 1;
    coerce.coerce_2d = true;
    EXPECT_EQ(check_gradients({op, share(coerce), {rnd({2, 3, 4}, -2, 2)}, {0}}), "") << op << " coerce_2d";
  }
}

TEST(NnGrad, BatchNormalizationTraining) {
  BatchNormalizationTrainingAttrs a;
  GradCheck c{"BatchNormalizationTraining",
              share(a),
              {rnd({4, 3, 3, 2}, -1, 2), rnd({3}), rnd({3}), rnd({3}), rnd({3}, 0.5, 1.5)},
              {0, 1, 2}};
  EXPECT_EQ(check_gradients(c), "");
  GradCheck flat{
      "BatchNormalizationTraining", share(a), {rnd({6, 4}), rnd({4}), rnd({4}), rnd({4}), rnd({4}, 0.5, 1.5)}, {0, 1}};
  EXPECT_EQ(check_gradients(flat), "");
}

TEST(NnGrad, BatchNormalizationInference) {
  BatchNormalizationAttrs a;
  GradCheck c{"BatchNormalization",
              share(a),
              {rnd({2, 3, 3, 3}), rnd({3}), rnd({3}), rnd({3}), rnd({3}, 0.5, 1.5)},
              {0, 1, 2, 3, 4}};
  EXPECT_EQ(check_gradients(c), "");
}

TEST(NnGrad, LayerNormalization) {
  LayerNormalizationAttrs last;
  EXPECT_EQ(check_gradients({"LayerNormalization", share(last), {rnd({3, 4, 6}), rnd({6}), rnd({6})}, {0, 1, 2}}), "");
  LayerNormalizationAttrs from1;
  from1.axis = 1;
  EXPECT_EQ(
      check_gradients({"LayerNormalization", share(from1), {rnd({3, 4, 5}), rnd({1, 5}), rnd({4, 5})}, {0, 1, 2}}), "");
  EXPECT_EQ(check_gradients({"LayerNormalization", share(last), {rnd({5, 7})}, {0}}), "");
}

TEST(NnGrad, InstanceNormalization) {
  InstanceNormalizationAttrs a;
  EXPECT_EQ(
      check_gradients({"InstanceNormalization", share(a), {rnd({2, 3, 3, 4}, -2, 2), rnd({3}), rnd({3})}, {0, 1, 2}}),
      "");
}

TEST(NnGrad, Lrn) {
  LrnAttrs a;
  a.size = 3;
  a.alpha = 0.4f;
  EXPECT_EQ(check_gradients({"LRN", share(a), {rnd({2, 5, 2, 3}, -2, 2)}, {0}}), "");
  a.size = 4;
  a.beta = 0.6f;
  a.bias = 1.5f;
  EXPECT_EQ(check_gradients({"LRN", share(a), {rnd({1, 6, 4}, -2, 2)}, {0}}), "");
}

TEST(NnGrad, Dropout) {
  DropoutAttrs a;
  a.ratio = 0.4f;
  a.seed = 1234;
  EXPECT_EQ(check_gradients({"Dropout", share(a), {rnd({4, 25}), int64_scalar(3)}, {0}}), "");
  // Outside training the rule passes dy through (no backward node).
  GradCheck eval{"Dropout", share(a), {rnd({4, 25})}, {0}};
  eval.training = false;
  EXPECT_EQ(backward_nodes(eval), 0);
  // The check itself catches a wrong rule: an identity gradient for a Dropout that drops.
  const std::string wrong = check_gradients(eval);
  EXPECT_NE(wrong.find("finite differences"), std::string::npos) << wrong;
  DropoutAttrs off = a;
  off.training = false;
  EXPECT_EQ(check_gradients({"Dropout", share(off), {rnd({3, 7})}, {0}}), "");
}

}  // namespace
}  // namespace kiln::train::testing

namespace kiln::train::testing {
namespace {

// A small CNN whose loss is its own output (no loss op): conv -> batch norm (training) -> relu -> dropout -> max
// pool -> 1x1 conv -> global average pool, differentiated by build_training_graph; the gradient of every parameter
// against central differences of the training graph's loss.
TEST(NnGrad, SmallCnnThroughAutograd) {
  Graph g;
  auto constant = [&](const char* name, const Dims& d, double lo, double hi) {
    return g.add_constant(name, rnd(d, lo, hi)).value();
  };
  Value* x = g.add_input("x", DataType::kFloat32, {1, 2, 6, 6}).value();
  auto node = [&](const char* op, const char* name, const Attrs& a, std::vector<Value*> in) {
    return g.add_node(op, name, a.clone(), std::move(in)).value()->outputs;
  };
  ConvolutionAttrs c1;
  c1.pads = {1, 1, 1, 1};
  Value* y =
      node("Convolution", "conv1", c1, {x, constant("w1", {3, 2, 3, 3}, -0.5, 0.5), constant("b1", {3}, -1, 1)})[0];
  y = node("BatchNormalizationTraining", "bn", BatchNormalizationTrainingAttrs{},
           {y, constant("gamma", {3}, 0.5, 1.5), constant("beta", {3}, -0.5, 0.5), constant("mean", {3}, 0, 0),
            constant("var", {3}, 1, 1)})[0];
  y = node("Activation", "relu", activation_defaults(ActivationKind::kRelu), {y})[0];
  DropoutAttrs d;
  d.ratio = 0.25f;
  d.seed = 5;
  y = node("Dropout", "drop", d, {y})[0];
  PoolingAttrs mp;
  mp.kernel_shape = {2, 2};
  mp.strides = {2, 2};
  y = node("Pooling", "pool", mp, {y})[0];
  y = node("Convolution", "conv2", ConvolutionAttrs{}, {y, constant("w2", {1, 3, 1, 1}, -1, 1)})[0];
  PoolingAttrs gap;
  gap.mode = PoolingMode::kAverage;
  gap.global = true;
  Value* loss = node("Pooling", "gap", gap, {y})[0];
  ASSERT_TRUE(g.mark_output(loss).is_ok());

  AutogradOptions options;
  options.state = {"mean", "var"};
  auto tg = build_training_graph(g, loss->name, options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();
  ASSERT_EQ(tg->params.size(), 5u);  // w1, b1, gamma, beta, w2
  const Tensor input = rnd({1, 2, 6, 6});
  for (Backend backend : {Backend::kRef, Backend::kCpu}) {
    BuildOptions o;
    o.backend = backend;
    o.optimization_level = 0;
    o.passes.enabled = false;
    auto runner = GraphRunner::compile(*tg->graph, o);
    ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
    std::map<std::string, Tensor> values;
    for (auto& [name, t] : tg->initial) values[name] = t.clone().value();
    ASSERT_TRUE(runner->set_input("x", input).is_ok());
    for (auto& [name, t] : values) ASSERT_TRUE(runner->set_input(name, t).is_ok());
    auto run_loss = [&]() {
      EXPECT_TRUE(runner->run().is_ok());
      return runner->output(tg->loss).value().at(0);
    };
    run_loss();
    for (size_t p = 0; p < tg->params.size(); ++p) {
      const Tensor grad = runner->output(tg->grads[p]).value().clone().value();
      Tensor& t = values[tg->params[p]];
      for (int64_t j = 0; j < t.numel(); ++j) {
        const double v = t.at(j), h = 1e-3;
        t.set(j, v + h);
        const double up = run_loss();
        t.set(j, v - h);
        const double down = run_loss();
        t.set(j, v);
        const double fd = (up - down) / (2 * h);
        EXPECT_NEAR(grad.at(j), fd, 5e-3 * (1 + std::fabs(fd)))
            << backend_name(backend) << " " << tg->params[p] << "[" << j << "]";
      }
    }
  }
}

}  // namespace
}  // namespace kiln::train::testing
