#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/det/det.h"

namespace kiln {
namespace {

Result<std::vector<TensorDesc>> infer(TensorDesc x) {
  NoAttrs a;
  std::vector<TensorDesc> in{x};
  return OpRegistry::global().find("Det")->infer_outputs(InferContext(a, in));
}

std::string error_of(TensorDesc x) {
  auto r = infer(x);
  return r.is_ok() ? "(no error)" : r.status().message();
}

TEST(DetInfer, ShapesAndErrors) {
  auto r = infer({DataType::kFloat32, {2, 5, 3, 3}, true});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{2, 5}));
  r = infer({DataType::kFloat16, {4, 4}, true});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{}));
  EXPECT_NE(error_of({DataType::kFloat32, {3, 4}, true}).find("square"), std::string::npos);
  EXPECT_NE(error_of({DataType::kFloat32, {3}, true}).find("rank >= 2"), std::string::npos);
  EXPECT_NE(error_of({DataType::kInt32, {3, 3}, true}).find("floating-point"), std::string::npos);
}

TEST(DetKernels, KnownValues) {
  for (Backend backend : {Backend::kRef, Backend::kCpu}) {
    NoAttrs a;
    // [[0 1 2] [1 0 3] [4 -3 8]] has det -2 (needs a row swap); [[2 0] [0 3]] padded as 3x3 diag 6.
    const double v[] = {0, 1, 2, 1, 0, 3, 4, -3, 8, 2, 0, 0, 0, 3, 0, 0, 0, 1};
    Tensor x = *Tensor::empty(DataType::kFloat32, {2, 3, 3});
    for (int i = 0; i < 18; ++i) x.set(i, v[i]);
    OpCall call{OpRegistry::global().find("Det"),
                &a,
                {{DataType::kFloat32, {2, 3, 3}, true}},
                {{DataType::kFloat32, {2}, true}}};
    std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, {2})};
    ASSERT_TRUE(op_test::run_engine(call, backend, {x}, dst).is_ok());
    EXPECT_NEAR(dst[0].at(0), -2.0, 1e-5) << backend_name(backend);
    EXPECT_NEAR(dst[0].at(1), 6.0, 1e-5) << backend_name(backend);
  }
}

}  // namespace
}  // namespace kiln
