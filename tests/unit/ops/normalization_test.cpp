#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/normalization/normalization.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in));
}

std::string error_of(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  auto r = infer(op, a, std::move(in));
  return r.is_ok() ? "" : r.status().message();
}

Tensor make(Dims dims, std::vector<double> values) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

// Runs every ref and CPU implementation that accepts the problem (each a pinned one-node engine); checks outputs
// against `want`.
void expect_values(const char* op, const Attrs& a, std::vector<Tensor> src,
                   const std::vector<std::vector<double>>& want) {
  int ran = 0;
  for (const auto& [name, result] : op_test::run_all(op, a, std::move(src))) {
    ASSERT_TRUE(result.is_ok()) << name << ": " << result.status().to_string();
    ++ran;
    const std::vector<Tensor>& dst = *result;
    ASSERT_EQ(dst.size(), want.size()) << name;
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(dst[o].numel(), static_cast<int64_t>(want[o].size())) << name;
      for (size_t i = 0; i < want[o].size(); ++i)
        EXPECT_NEAR(dst[o].at(static_cast<int64_t>(i)), want[o][i], 1e-5)
            << name << " output " << o << " element " << i;
    }
  }
  EXPECT_GE(ran, 2) << "expected a reference and a CPU implementation";
}

TEST(NormalizationInfer, Shapes) {
  BatchNormalizationAttrs bn;
  auto r = infer("BatchNormalization", bn, {f32({2, 3, 4}), f32({3}), f32({3}), f32({3}), f32({3})});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{2, 3, 4}));
  LayerNormalizationAttrs ln;
  ln.axis = -2;
  ln.return_stats = true;
  r = infer("LayerNormalization", ln, {f32({2, 3, 4}), f32({4}), TensorDesc::absent()});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].dims, (Dims{2, 3, 4}));
  EXPECT_EQ((*r)[1].dims, (Dims{2, 1, 1}));
  EXPECT_EQ((*r)[2].dtype, DataType::kFloat32);
  r = infer("LayerNormalization", LayerNormalizationAttrs{}, {{DataType::kFloat16, {5}, true}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].dtype, DataType::kFloat16);
  r = infer("InstanceNormalization", InstanceNormalizationAttrs{}, {f32({2, 3, 4, 4}), f32({3}), f32({3})});
  ASSERT_TRUE(r.is_ok());
  LrnAttrs lrn;
  lrn.size = 3;
  r = infer("LRN", lrn, {f32({1, 5, 2, 2})});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{1, 5, 2, 2}));
}

TEST(NormalizationInfer, Errors) {
  BatchNormalizationAttrs bn;
  EXPECT_NE(error_of("BatchNormalization", bn, {f32({2, 3}), f32({4}), f32({3}), f32({3}), f32({3})})
                .find("scale must have shape [3]"),
            std::string::npos);
  EXPECT_NE(error_of("BatchNormalization", bn, {f32({3}), f32({3}), f32({3}), f32({3}), f32({3})}).find("rank >= 2"),
            std::string::npos);
  EXPECT_NE(
      error_of("BatchNormalization", bn, {{DataType::kInt32, {2, 3}, true}, f32({3}), f32({3}), f32({3}), f32({3})})
          .find("floating-point"),
      std::string::npos);
  bn.epsilon = -1.f;
  EXPECT_NE(error_of("BatchNormalization", bn, {f32({2, 3}), f32({3}), f32({3}), f32({3}), f32({3})}).find("epsilon"),
            std::string::npos);
  LayerNormalizationAttrs ln;
  ln.axis = 3;
  EXPECT_NE(error_of("LayerNormalization", ln, {f32({2, 3, 4})}).find("axis"), std::string::npos);
  ln.axis = -4;
  EXPECT_NE(error_of("LayerNormalization", ln, {f32({2, 3, 4})}).find("axis"), std::string::npos);
  ln.axis = -1;
  EXPECT_NE(error_of("LayerNormalization", ln, {f32({2, 3, 4}), f32({3})}).find("scale of shape [3]"),
            std::string::npos);
  EXPECT_NE(error_of("LayerNormalization", ln, {f32({2, 3, 4}), f32({4}), f32({3, 4})}).find("bias"),
            std::string::npos);
  EXPECT_NE(error_of("LayerNormalization", ln, {f32({})}).find("rank >= 1"), std::string::npos);
  EXPECT_NE(error_of("InstanceNormalization", InstanceNormalizationAttrs{}, {f32({2, 3}), f32({3}), f32({3})})
                .find("rank >= 3"),
            std::string::npos);
  EXPECT_NE(error_of("InstanceNormalization", InstanceNormalizationAttrs{}, {f32({2, 3, 4}), f32({3}), f32({2})})
                .find("bias must have shape [3]"),
            std::string::npos);
  LrnAttrs lrn;
  lrn.size = 0;
  EXPECT_NE(error_of("LRN", lrn, {f32({1, 3, 2, 2})}).find("size = 0"), std::string::npos);
  lrn.size = 3;
  EXPECT_NE(error_of("LRN", lrn, {f32({3})}).find("rank >= 2"), std::string::npos);
}

TEST(NormalizationValues, BatchNorm) {
  BatchNormalizationAttrs a;
  a.epsilon = 0.f;
  expect_values(
      "BatchNormalization", a,
      {make({2, 2}, {1, 2, 3, 4}), make({2}, {1, 2}), make({2}, {0, 1}), make({2}, {1, 2}), make({2}, {4, 1})},
      {{0, 1, 1, 5}});
}

TEST(NormalizationValues, LayerNorm) {
  LayerNormalizationAttrs a;
  a.epsilon = 0.f;
  a.return_stats = true;
  const double inv = 1 / std::sqrt(1.25);
  expect_values("LayerNormalization", a, {make({1, 4}, {1, 2, 3, 4})},
                {{-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv}, {2.5}, {inv}});
  // axis 0 over [2, 2]; scale broadcast [2] (per column), bias scalar-like [1].
  a.axis = 0;
  a.return_stats = false;
  expect_values("LayerNormalization", a, {make({2, 2}, {1, 2, 3, 4}), make({2}, {1, 2}), make({1}, {10})},
                {{10 - 1.5 * inv, 10 - 0.5 * 2 * inv, 10 + 0.5 * inv, 10 + 1.5 * 2 * inv}});
}

TEST(NormalizationValues, InstanceNorm) {
  InstanceNormalizationAttrs a;
  a.epsilon = 0.f;
  const double inv = 1 / std::sqrt(1.25);
  expect_values("InstanceNormalization", a,
                {make({1, 2, 4}, {1, 2, 3, 4, 5, 5, 7, 7}), make({2}, {2, 1}), make({2}, {1, 0})},
                {{1 - 3 * inv, 1 - inv, 1 + inv, 1 + 3 * inv, -1, -1, 1, 1}});
}

TEST(NormalizationValues, Lrn) {
  LrnAttrs a;
  a.size = 3;
  a.alpha = 3.f;  // alpha / size = 1
  a.beta = 1.f;
  a.bias = 1.f;
  expect_values("LRN", a, {make({1, 3, 1, 1}, {1, 2, 3})}, {{1. / 6, 2. / 15, 3. / 14}});
  // Even size: the window reaches one channel further up than down (ONNX).
  a.size = 2;
  a.alpha = 2.f;
  expect_values("LRN", a, {make({1, 3, 1, 1}, {1, 2, 3})}, {{1. / 6, 2. / 14, 3. / 10}});
}

}  // namespace
}  // namespace kiln
