// The training ops of the NN families: schema errors, and values the harness cannot check against the reference
// alone (dropout's determinism and rate, running-statistics updates, max pooling's first maximum).
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/dropout/dropout.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"
#include "ops/pooling/pooling.h"

namespace kiln::op_test {
namespace {

constexpr DataType kF32 = DataType::kFloat32;

TEST(NnBackwardSchema, ConvolutionBackwardErrorsNameTheShapes) {
  ConvolutionAttrs a;
  a.pads = {1, 1, 1, 1};
  auto ok = infer("ConvolutionBackwardData", a,
                  {desc(kF32, {2, 4, 5, 5}), desc(kF32, {4, 3, 3, 3}), desc(kF32, {2, 3, 5, 5})});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].dims, (Dims{2, 3, 5, 5}));
  expect_error(infer("ConvolutionBackwardData", a,
                     {desc(kF32, {2, 4, 4, 5}), desc(kF32, {4, 3, 3, 3}), desc(kF32, {2, 3, 5, 5})}),
               "must have the forward output's shape [2, 4, 5, 5]");
  a.fused.on = true;
  expect_error(infer("ConvolutionBackwardData", a,
                     {desc(kF32, {2, 4, 5, 5}), desc(kF32, {4, 3, 3, 3}), desc(kF32, {2, 3, 5, 5})}),
               "training graphs are unfused");
  ConvolutionAttrs f;
  f.kernel_shape = {3, 3};
  f.group = 2;
  auto dw = infer("ConvolutionBackwardFilter", f, {desc(kF32, {1, 4, 6, 6}), desc(kF32, {1, 6, 4, 4})});
  ASSERT_TRUE(dw.is_ok()) << dw.status().to_string();
  EXPECT_EQ((*dw)[0].dims, (Dims{6, 2, 3, 3}));
  f.kernel_shape.clear();
  expect_error(infer("ConvolutionBackwardFilter", f, {desc(kF32, {1, 4, 6, 6}), desc(kF32, {1, 6, 4, 4})}),
               "needs kernel_shape");
}

TEST(NnBackwardSchema, OtherErrors) {
  PoolingAttrs p;
  p.kernel_shape = {2, 2};
  p.strides = {2, 2};
  expect_error(infer("PoolingBackward", p, {desc(kF32, {1, 2, 3, 3}), desc(kF32, {1, 2, 4, 4})}),
               "must have the pooling output's shape [1, 2, 2, 2]");
  expect_error(infer("ActivationBackward", activation_defaults(ActivationKind::kPRelu),
                     {desc(kF32, {2, 3}), desc(kF32, {2, 3})}),
               "needs the slope");
  DropoutAttrs d;
  d.ratio = 1.f;
  expect_error(infer("Dropout", d, {desc(kF32, {4})}), "must be in [0, 1)");
  d.ratio = 0.5f;
  expect_error(infer("Dropout", d, {desc(kF32, {4}), desc(DataType::kFloat32, {})}), "int32 or int64 scalar");
  BatchNormalizationTrainingAttrs bn;
  bn.momentum = 1.5f;
  expect_error(infer("BatchNormalizationTraining", bn,
                     {desc(kF32, {2, 3}), desc(kF32, {3}), desc(kF32, {3}), desc(kF32, {3}), desc(kF32, {3})}),
               "momentum = 1.5");
  bn.momentum = 0.9f;
  expect_error(infer("BatchNormalizationTraining", bn,
                     {desc(kF32, {2, 3}), desc(kF32, {4}), desc(kF32, {3}), desc(kF32, {3}), desc(kF32, {3})}),
               "scale must have shape [3]");
}

TEST(NnBackwardKernels, DropoutIsDeterministicPerSeedAndStepAndDropsAtItsRate) {
  DropoutAttrs d;
  d.ratio = 0.3f;
  d.seed = 42;
  std::vector<double> ones(10000, 1.0);
  const Tensor x = make(kF32, {10000}, ones);
  auto masks = [&](int64_t step) {
    std::vector<std::vector<uint8_t>> out;
    for (auto& [name, r] : run_all("Dropout", d, {x, make(DataType::kInt64, {}, {static_cast<double>(step)})})) {
      EXPECT_TRUE(r.is_ok()) << name << ": " << r.status().to_string();
      if (!r.is_ok()) continue;
      const Tensor& y = (*r)[0];
      const Tensor& m = (*r)[1];
      std::vector<uint8_t> bits;
      for (int64_t i = 0; i < m.numel(); ++i) {
        bits.push_back(m.at(i) != 0);
        EXPECT_NEAR(y.at(i), bits.back() ? 1.0 / 0.7 : 0.0, 1e-6) << name;
      }
      out.push_back(bits);
    }
    return out;
  };
  const auto a = masks(7), b = masks(7), c = masks(8);
  ASSERT_EQ(a.size(), 2u);  // ref and cpu
  EXPECT_EQ(a[0], a[1]);    // the backends agree
  EXPECT_EQ(a[0], b[0]);    // the same step repeats
  EXPECT_NE(a[0], c[0]);    // another step draws another mask
  int kept = 0;
  for (uint8_t v : a[0]) kept += v;
  EXPECT_NEAR(kept / 10000.0, 0.7, 0.02);
}

TEST(NnBackwardKernels, BatchNormTrainingUpdatesRunningStatistics) {
  BatchNormalizationTrainingAttrs a;
  a.momentum = 0.75f;
  // One channel over a batch of 4: mean 2.5, variance 1.25 (no Bessel correction).
  const Tensor x = make(kF32, {4, 1}, {1, 2, 3, 4});
  for (auto& [name, r] :
       run_all("BatchNormalizationTraining", a,
               {x, make(kF32, {1}, {2}), make(kF32, {1}, {1}), make(kF32, {1}, {1}), make(kF32, {1}, {3})})) {
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().to_string();
    const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
    expect_values((*r)[0], {1 - 3 * inv, 1 - inv, 1 + inv, 1 + 3 * inv}, name, 1e-5);
    expect_values((*r)[1], {0.75 * 1 + 0.25 * 2.5}, name, 1e-6);
    expect_values((*r)[2], {0.75 * 3 + 0.25 * 1.25}, name, 1e-6);
    expect_values((*r)[3], {2.5}, name, 1e-6);
    expect_values((*r)[4], {inv}, name, 1e-5);
  }
}

TEST(NnBackwardKernels, MaxPoolingBackwardRoutesToTheFirstMaximum) {
  PoolingAttrs p;
  p.kernel_shape = {2, 2};
  p.strides = {1, 1};
  // 2x3 input with a tie (5, 5) in the first window: the first (row-major) gets the gradient.
  const Tensor x = make(kF32, {1, 1, 2, 3}, {5, 5, 1, 0, 2, 7});
  const Tensor dy = make(kF32, {1, 1, 1, 2}, {10, 100});
  for (auto& [name, r] : run_all("PoolingBackward", p, {dy, x})) {
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().to_string();
    expect_values((*r)[0], {10, 0, 0, 0, 0, 100}, name);
  }
}

}  // namespace
}  // namespace kiln::op_test
