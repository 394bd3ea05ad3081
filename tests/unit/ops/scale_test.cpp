#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/scale/scale.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const ScaleAttrs& a, std::vector<TensorDesc> in) {
  return OpRegistry::global().find("Scale")->infer_outputs(InferContext(a, in));
}

ScaleAttrs mode(ScaleMode m, int64_t axis = 1) {
  ScaleAttrs a;
  a.mode = m;
  a.channel_axis = axis;
  return a;
}

TEST(ScaleSchema, CoefficientCounts) {
  const TensorDesc x = f32({2, 3, 4, 5});
  auto ok = [&](ScaleAttrs a, Dims p) {
    auto r = infer(a, {x, f32(p), f32(p), f32(p)});
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (r) {
      EXPECT_EQ((*r)[0].dims, x.dims);
    }
  };
  ok(mode(ScaleMode::kUniform), {1});
  ok(mode(ScaleMode::kUniform), {});
  ok(mode(ScaleMode::kChannel), {3});
  ok(mode(ScaleMode::kChannel, -1), {5});
  ok(mode(ScaleMode::kElementwise), {3, 4, 5});
  ok(mode(ScaleMode::kElementwise, 2), {20});
  auto absent_ok = infer(mode(ScaleMode::kChannel), {x, TensorDesc::absent(), f32({3})});
  EXPECT_TRUE(absent_ok.is_ok());
}

TEST(ScaleSchema, Errors) {
  const TensorDesc x = f32({2, 3, 4, 5});
  auto r = infer(mode(ScaleMode::kChannel), {x, f32({4})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'shift' of shape [4] has 4 elements"), std::string::npos);
  EXPECT_NE(r.status().message().find("needs 3"), std::string::npos);
  r = infer(mode(ScaleMode::kElementwise), {x, TensorDesc::absent(), f32({3})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'scale'"), std::string::npos);
  r = infer(mode(ScaleMode::kChannel, 4), {x});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("channel_axis 4 is out of range"), std::string::npos);
  r = infer(mode(ScaleMode::kUniform), {{DataType::kInt32, {3}, true}});
  EXPECT_FALSE(r.is_ok());
  r = infer(mode(ScaleMode::kUniform), {x, {DataType::kFloat16, {1}, true}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("same type"), std::string::npos);
  ScaleAttrs bad;
  bad.mode = static_cast<ScaleMode>(7);
  EXPECT_FALSE(infer(bad, {x}).is_ok());
}

TEST(ScaleKernels, HandComputedChannel) {
  ScaleAttrs a = mode(ScaleMode::kChannel, 0);
  OpCall call{OpRegistry::global().find("Scale"), &a, {f32({2, 2}), f32({2}), f32({2}), f32({2})}, {f32({2, 2})}};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto x = *Tensor::empty(DataType::kFloat32, {2, 2});
    auto shift = *Tensor::empty(DataType::kFloat32, {2});
    auto scale = *Tensor::empty(DataType::kFloat32, {2});
    auto power = *Tensor::empty(DataType::kFloat32, {2});
    for (int i = 0; i < 4; ++i) x.set(i, i + 1);  // [[1, 2], [3, 4]]
    shift.set(0, 1), shift.set(1, 0);
    scale.set(0, 2), scale.set(1, 1);
    power.set(0, 2), power.set(1, 0.5);
    std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, {2, 2})};
    ASSERT_TRUE(op_test::run_engine(call, b, {x, shift, scale, power}, dst).is_ok());
    // row 0: (2x + 1)^2 -> 9, 25; row 1: sqrt(x) -> sqrt(3), 2.
    EXPECT_FLOAT_EQ(dst[0].at(0), 9.f) << backend_name(b);
    EXPECT_FLOAT_EQ(dst[0].at(1), 25.f) << backend_name(b);
    EXPECT_FLOAT_EQ(dst[0].at(2), std::sqrt(3.f)) << backend_name(b);
    EXPECT_FLOAT_EQ(dst[0].at(3), 2.f) << backend_name(b);
  }
}

}  // namespace
}  // namespace kiln
