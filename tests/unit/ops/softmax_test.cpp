#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/softmax/softmax.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const char* op, const SoftmaxAttrs& a, TensorDesc x) {
  std::vector<TensorDesc> in{x};
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in));
}

TEST(SoftmaxSchema, ShapesAndErrors) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SoftmaxAttrs a;
    auto r = infer(op, a, f32({2, 3}));
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ((*r)[0].dims, (Dims{2, 3}));
    a.axis = -3;
    r = infer(op, a, f32({2, 3}));
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("axis -3 is out of range"), std::string::npos);
    EXPECT_NE(r.status().message().find(op), std::string::npos);
    a.axis = 0;
    EXPECT_FALSE(infer(op, a, f32({})).is_ok());
    EXPECT_FALSE(infer(op, a, {DataType::kInt32, {3}, true}).is_ok());
  }
}

TEST(SoftmaxKernels, RowsSumToOneAndLogMatches) {
  SoftmaxAttrs a;
  a.axis = 0;
  const Dims d = {3, 2};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto x = *Tensor::empty(DataType::kFloat32, d);
    for (int i = 0; i < 6; ++i) x.set(i, 100.0 * i);  // large logits: needs the max subtraction
    OpCall call{OpRegistry::global().find("Softmax"), &a, {f32(d)}, {f32(d)}};
    std::vector<Tensor> y{*Tensor::empty(DataType::kFloat32, d)};
    ASSERT_TRUE(op_test::run_engine(call, b, {x}, y).is_ok());
    OpCall log_call{OpRegistry::global().find("LogSoftmax"), &a, {f32(d)}, {f32(d)}};
    std::vector<Tensor> ly{*Tensor::empty(DataType::kFloat32, d)};
    ASSERT_TRUE(op_test::run_engine(log_call, b, {x}, ly).is_ok());
    for (int col = 0; col < 2; ++col) {
      EXPECT_NEAR(y[0].at(col) + y[0].at(2 + col) + y[0].at(4 + col), 1.0, 1e-6) << backend_name(b);
      EXPECT_NEAR(y[0].at(4 + col), 1.0, 1e-6) << backend_name(b);
      EXPECT_NEAR(ly[0].at(2 + col), -200.0, 1e-3) << backend_name(b);
      EXPECT_NEAR(ly[0].at(4 + col), 0.0, 1e-6) << backend_name(b);
    }
  }
}

}  // namespace
}  // namespace kiln
