#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/constant_of_shape/constant_of_shape.h"

namespace kiln {
namespace {

Result<std::vector<TensorDesc>> infer(const ConstantOfShapeAttrs& a, TensorDesc shape, const Tensor* value) {
  std::vector<TensorDesc> in{shape};
  std::vector<const Tensor*> values{value};
  return OpRegistry::global().find("ConstantOfShape")->infer_outputs(InferContext(a, in, values));
}

Tensor int64s(std::vector<int64_t> v) {
  Tensor t = *Tensor::empty(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

TEST(ConstantOfShape, InfersShapeAndDtype) {
  ConstantOfShapeAttrs a;
  a.dtype = DataType::kInt32;
  Tensor shape = int64s({2, 0, 5});
  auto r = infer(a, {DataType::kInt64, {3}, true}, &shape);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0], (TensorDesc{DataType::kInt32, {2, 0, 5}, true}));
  r = infer(a, {DataType::kInt64, {2}, true}, nullptr);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, Dims::of_rank(2, kDynamicDim));
}

TEST(ConstantOfShape, RejectsBadShapes) {
  ConstantOfShapeAttrs a;
  Tensor neg = int64s({2, -1});
  auto r = infer(a, {DataType::kInt64, {2}, true}, &neg);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("negative"), std::string::npos) << r.status().message();
  r = infer(a, {DataType::kFloat32, {2}, true}, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("int64"), std::string::npos);
  r = infer(a, {DataType::kInt64, {2, 2}, true}, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("1-D"), std::string::npos);
  r = infer(a, {DataType::kInt64, {kDynamicDim}, true}, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("known length"), std::string::npos);
  a.dtype = static_cast<DataType>(99);
  Tensor ok = int64s({1});
  EXPECT_FALSE(infer(a, {DataType::kInt64, {1}, true}, &ok).is_ok());
}

TEST(ConstantOfShape, FillsExactInt64) {
  ConstantOfShapeAttrs a;
  a.dtype = DataType::kInt64;
  a.int_value = (int64_t{1} << 60) + 3;
  Tensor shape = int64s({2, 3});
  const OpSchema* s = OpRegistry::global().find("ConstantOfShape");
  std::vector<TensorDesc> in{{DataType::kInt64, {2}, true}};
  std::vector<const Tensor*> values{&shape};
  auto out = s->infer_outputs(InferContext(a, in, values));
  ASSERT_TRUE(out.is_ok());
  OpCall call{s, &a, in, *out};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    std::vector<Tensor> dst{*Tensor::empty(DataType::kInt64, {2, 3})};
    ASSERT_TRUE(op_test::run_engine(call, b, {shape}, dst).is_ok());
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(dst[0].data<int64_t>()[i], a.int_value) << backend_name(b);
  }
}

}  // namespace
}  // namespace kiln
