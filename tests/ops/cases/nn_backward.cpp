// Harness cases of the training ops of the neural-network families: convolution, pooling, activation, softmax
// and normalization backward ops, BatchNormalizationTraining and Dropout.
#include "harness.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/dropout/dropout.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"
#include "ops/pooling/pooling.h"
#include "ops/softmax/softmax.h"

namespace kiln::harness {
namespace {

const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

ConvolutionAttrs conv(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dilations,
                      int64_t group) {
  ConvolutionAttrs a;
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  a.dilations = std::move(dilations);
  a.group = group;
  return a;
}

// The forward output dims of a convolution (the dims of dy).
Dims conv_out(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  ConvWindow win = convolution_window(a, x, w).value();
  Dims y = x;
  y[1] = w[0];
  for (int i = 0; i < win.rank(); ++i) y[2 + i] = win.output[i];
  return y;
}

void conv_cases(std::vector<OpCase>& cases) {
  struct Conv {
    const char* name;
    ConvolutionAttrs a;
    Dims x, w;
  };
  const Conv convs[] = {
      {"2d 3x3 pad1", conv({}, {1, 1, 1, 1}, {}, 1), {2, 3, 7, 7}, {4, 3, 3, 3}},
      {"2d stride2 dilation group2 asym pads", conv({2, 2}, {1, 0, 0, 1}, {2, 1}, 2), {1, 4, 9, 8}, {6, 2, 3, 2}},
      {"2d depthwise stride2", conv({2, 2}, {1, 1, 1, 1}, {}, 3), {2, 3, 8, 8}, {3, 1, 3, 3}},
      {"1d stride3 pad1", conv({3}, {1, 1}, {}, 1), {2, 3, 10}, {5, 3, 3}},
      {"3d", conv({}, {}, {}, 1), {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}},
  };
  for (const Conv& c : convs) {
    const Dims y = conv_out(c.a, c.x, c.w);
    cases.push_back(
        {"ConvolutionBackwardData", c.name, attrs(c.a), {uniform(y), uniform(c.w), uniform(c.x)}, kFloats, 2.0});
    ConvolutionAttrs f = c.a;
    f.kernel_shape.assign(c.w.begin() + 2, c.w.end());
    cases.push_back({"ConvolutionBackwardFilter", c.name, attrs(f), {uniform(c.x), uniform(y)}, kFloats, 4.0});
  }
}

PoolingAttrs pool(PoolingMode mode, std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                  std::vector<int64_t> pads = {}) {
  PoolingAttrs a;
  a.mode = mode;
  a.kernel_shape = std::move(kernel);
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  return a;
}

void pooling_cases(std::vector<OpCase>& cases) {
  using M = PoolingMode;
  auto push = [&](std::string name, const PoolingAttrs& a, const Dims& x) {
    const PoolingGeometry g = pooling_geometry(a, x).value();
    Dims y = x;
    for (int i = 0; i < g.spatial; ++i) y[2 + i] = g.out[i];
    cases.push_back({"PoolingBackward", std::move(name), attrs(a), {uniform(y), uniform(x, -2, 2)}});
  };
  for (M mode : {M::kMax, M::kAverage, M::kLp}) {
    const std::string m = enum_name(mode);
    push(m + " 2d k2 s2", pool(mode, {2, 2}, {2, 2}), {2, 3, 8, 8});
    push(m + " 2d k3 s2 pad1", pool(mode, {3, 3}, {2, 2}, {1, 1, 1, 1}), {1, 2, 7, 7});
    push(m + " 1d k3 s1", pool(mode, {3}), {2, 2, 9});
    push(m + " 3d k2 s2", pool(mode, {2, 2, 2}, {2, 2, 2}), {1, 2, 4, 4, 4});
    PoolingAttrs ceil = pool(mode, {3, 3}, {2, 2}, {1, 1, 1, 1});
    ceil.ceil_mode = true;
    push(m + " 2d ceil_mode", ceil, {1, 3, 8, 7});
    PoolingAttrs global;
    global.mode = mode;
    global.global = true;
    push(m + " global", global, {2, 3, 5, 4});
  }
  PoolingAttrs include = pool(M::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1});
  include.count_include_pad = true;
  push("average count_include_pad", include, {2, 2, 7, 6});
  PoolingAttrs dilated = pool(M::kMax, {2, 2}, {1, 1});
  dilated.dilations = {2, 2};
  push("max dilated", dilated, {1, 2, 6, 6});
}

void activation_cases(std::vector<OpCase>& cases) {
  for (int k = 0; k <= static_cast<int>(ActivationKind::kCelu); ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    if (kind == ActivationKind::kPRelu) continue;
    const Dims d{2, 3, 5, 7};
    cases.push_back(
        {"ActivationBackward", enum_name(kind), attrs(activation_defaults(kind)), {uniform(d), uniform(d, -4, 4)}});
  }
  ActivationAttrs clip = activation_defaults(ActivationKind::kClip);
  clip.alpha = -0.5f;
  clip.beta = 0.7f;
  cases.push_back({"ActivationBackward", "clip [-0.5, 0.7]", attrs(clip), {uniform({300}), uniform({300}, -2, 2)}});
  ActivationAttrs gelu_tanh = activation_defaults(ActivationKind::kGelu);
  gelu_tanh.beta = 1.f;
  cases.push_back({"ActivationBackward", "gelu tanh", attrs(gelu_tanh), {uniform({4, 65}), uniform({4, 65}, -5, 5)}});
  cases.push_back({"ActivationBackward",
                   "prelu per channel",
                   attrs(activation_defaults(ActivationKind::kPRelu)),
                   {uniform({2, 3, 5, 5}), uniform({2, 3, 5, 5}, -2, 2), uniform({3, 1, 1}, 0, 0.5)}});
}

void softmax_cases(std::vector<OpCase>& cases) {
  auto sm = [](int64_t axis, bool coerce) {
    SoftmaxAttrs a;
    a.axis = axis;
    a.coerce_2d = coerce;
    return a;
  };
  for (const char* op : {"SoftmaxBackward", "LogSoftmaxBackward"}) {
    const bool log = std::string(op) == "LogSoftmaxBackward";
    const double lo = log ? -4 : 0.01, hi = log ? -0.01 : 1;
    cases.push_back({op, "axis -1", attrs(sm(-1, false)), {uniform({3, 4, 10}), uniform({3, 4, 10}, lo, hi)}});
    cases.push_back({op, "axis 1", attrs(sm(1, false)), {uniform({3, 6, 5}), uniform({3, 6, 5}, lo, hi)}});
    cases.push_back({op, "coerce_2d axis 1", attrs(sm(1, true)), {uniform({2, 3, 4}), uniform({2, 3, 4}, lo, hi)}});
  }
}

// BatchNormalizationTraining's grad-mode loss reads y only (grad_outputs {0}): the other outputs are statistics.
void normalization_cases(std::vector<OpCase>& cases) {
  BatchNormalizationTrainingAttrs bn;
  bn.momentum = 0.8f;
  cases.push_back({"BatchNormalizationTraining",
                   "4x3x5x5",
                   attrs(bn),
                   {uniform({4, 3, 5, 5}, -2, 3), uniform({3}), uniform({3}), uniform({3}), uniform({3}, 0.5, 1.5)},
                   kFloats,
                   2.0,
                   {0}});
  cases.push_back({"BatchNormalizationTraining",
                   "2d 8x6",
                   attrs(BatchNormalizationTrainingAttrs{}),
                   {uniform({8, 6}), uniform({6}), uniform({6}), uniform({6}), uniform({6}, 0.5, 1.5)},
                   kFloats,
                   1.0,
                   {0}});
  BatchNormalizationBackwardAttrs train;
  cases.push_back(
      {"BatchNormalizationBackward",
       "training",
       attrs(train),
       {uniform({4, 3, 5, 5}), uniform({4, 3, 5, 5}), uniform({3}), uniform({3}, -0.2, 0.2), uniform({3}, 0.5, 2)},
       kFloats,
       2.0});
  BatchNormalizationBackwardAttrs global;
  global.global_stats = true;
  cases.push_back({"BatchNormalizationBackward",
                   "global stats",
                   attrs(global),
                   {uniform({2, 4, 3, 3}), uniform({2, 4, 3, 3}), uniform({4}), uniform({4}), uniform({4}, 0.5, 1.5)},
                   kFloats,
                   2.0});
  auto ln = [](int64_t axis) {
    LayerNormalizationAttrs a;
    a.axis = axis;
    return a;
  };
  cases.push_back({"LayerNormalizationBackward",
                   "axis -1",
                   attrs(ln(-1)),
                   {uniform({4, 6, 8}), uniform({4, 6, 8}), uniform({8})},
                   kFloats,
                   2.0});
  cases.push_back({"LayerNormalizationBackward",
                   "axis 1 scale broadcast",
                   attrs(ln(1)),
                   {uniform({3, 4, 5}), uniform({3, 4, 5}), uniform({1, 5})},
                   kFloats,
                   2.0});
  cases.push_back({"InstanceNormalizationBackward",
                   "2x3x4x5",
                   attrs(InstanceNormalizationAttrs{}),
                   {uniform({2, 3, 4, 5}), uniform({2, 3, 4, 5}, -2, 2), uniform({3})},
                   kFloats,
                   2.0});
  LrnAttrs lrn;
  lrn.size = 5;
  lrn.alpha = 0.5f;
  cases.push_back({"LRNBackward", "size 5", attrs(lrn), {uniform({2, 7, 3, 3}), uniform({2, 7, 3, 3}, -2, 2)}});
  lrn.size = 4;
  lrn.beta = 0.6f;
  lrn.bias = 2.f;
  cases.push_back({"LRNBackward", "size 4 (even)", attrs(lrn), {uniform({3, 6, 5}), uniform({3, 6, 5}, -2, 2)}});
  cases.push_back(
      {"LayerNormalizationBackward", "no scale", attrs(ln(-1)), {uniform({5, 7}), uniform({5, 7})}, kFloats, 2.0});
}

void dropout_cases(std::vector<OpCase>& cases) {
  DropoutAttrs d;
  d.ratio = 0.3f;
  d.seed = 7;
  cases.push_back({"Dropout", "ratio 0.3", attrs(d), {uniform({4, 100})}});
  cases.push_back({"Dropout", "ratio 0.3 step 5", attrs(d), {uniform({3, 5, 7}), fixed(DataType::kInt64, {}, {5})}});
  DropoutAttrs eval = d;
  eval.training = false;
  cases.push_back({"Dropout", "not training", attrs(eval), {uniform({2, 9})}});
  std::vector<double> mask;
  for (int i = 0; i < 60; ++i) mask.push_back(i % 3 == 0 ? 0 : 1);
  cases.push_back(
      {"DropoutBackward", "ratio 0.3", attrs(d), {uniform({6, 10}), fixed(DataType::kBool, {6, 10}, mask)}});
}

}  // namespace

KILN_OP_CASES(nn_backward) {
  std::vector<OpCase> cases;
  conv_cases(cases);
  pooling_cases(cases);
  activation_cases(cases);
  softmax_cases(cases);
  normalization_cases(cases);
  dropout_cases(cases);
  return cases;
}

}  // namespace kiln::harness
