#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/cumsum/cumsum.h"

namespace kiln {
namespace {

Tensor int64s(std::vector<double> v, Dims dims) {
  Tensor t = *Tensor::empty(DataType::kInt64, dims);
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}

Result<std::vector<TensorDesc>> infer(TensorDesc x, TensorDesc axis, const Tensor* value = nullptr) {
  CumSumAttrs a;
  std::vector<TensorDesc> in{x, axis};
  std::vector<const Tensor*> values{nullptr, value};
  return OpRegistry::global().find("CumSum")->infer_outputs(InferContext(a, in, values));
}

std::string error_of(TensorDesc x, TensorDesc axis, const Tensor* value = nullptr) {
  auto r = infer(x, axis, value);
  return r.is_ok() ? "(no error)" : r.status().message();
}

TEST(CumSumInfer, ShapesAndErrors) {
  const TensorDesc x{DataType::kFloat32, {3, 4}, true}, scalar{DataType::kInt64, {}, true};
  auto r = infer(x, scalar);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{3, 4}));
  const Tensor bad = int64s({2}, {});
  EXPECT_NE(error_of(x, scalar, &bad).find("axis 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of(x, {DataType::kInt64, {2}, true}).find("must be a scalar"), std::string::npos);
  EXPECT_NE(error_of(x, {DataType::kFloat32, {}, true}).find("int32 or int64"), std::string::npos);
  EXPECT_NE(error_of({DataType::kBool, {3}, true}, scalar).find("floating, int32 or int64"), std::string::npos);
  EXPECT_NE(error_of({DataType::kFloat32, {}, true}, scalar).find("rank >= 1"), std::string::npos);
}

TEST(CumSumKernels, ExclusiveReverse) {
  for (Backend backend : {Backend::kRef, Backend::kCpu}) {
    CumSumAttrs a;
    a.exclusive = true;
    a.reverse = true;
    Tensor x = *Tensor::empty(DataType::kFloat32, {2, 3});
    for (int i = 0; i < 6; ++i) x.set(i, i + 1);  // [[1 2 3] [4 5 6]]
    const Tensor axis = int64s({1}, {});
    OpCall call{OpRegistry::global().find("CumSum"),
                &a,
                {{DataType::kFloat32, {2, 3}, true}, {DataType::kInt64, {}, true}},
                {{DataType::kFloat32, {2, 3}, true}}};
    std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, {2, 3})};
    ASSERT_TRUE(op_test::run_engine(call, backend, {x, axis}, dst).is_ok());
    const double want[] = {5, 3, 0, 11, 6, 0};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(dst[0].at(i), want[i]) << backend_name(backend) << " " << i;
  }
}

}  // namespace
}  // namespace kiln
