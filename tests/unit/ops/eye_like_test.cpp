#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/eye_like/eye_like.h"

namespace kiln {
namespace {

TEST(EyeLike, InfersAndRejects) {
  const OpSchema* s = OpRegistry::global().find("EyeLike");
  EyeLikeAttrs a;
  std::vector<TensorDesc> in{{DataType::kInt32, {3, 4}, true}};
  auto r = s->infer_outputs(InferContext(a, in));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0], (TensorDesc{DataType::kInt32, {3, 4}, true}));
  a.has_dtype = true;
  a.dtype = DataType::kFloat16;
  r = s->infer_outputs(InferContext(a, in));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dtype, DataType::kFloat16);
  std::vector<TensorDesc> cube{{DataType::kFloat32, {2, 2, 2}, true}};
  r = s->infer_outputs(InferContext(a, cube));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("2-D"), std::string::npos) << r.status().message();
  a.dtype = DataType::kFp8E4M3;
  EXPECT_FALSE(s->infer_outputs(InferContext(a, in)).is_ok());
}

TEST(EyeLike, OffDiagonal) {
  const OpSchema* s = OpRegistry::global().find("EyeLike");
  EyeLikeAttrs a;
  a.k = -1;
  std::vector<TensorDesc> in{{DataType::kFloat32, {3, 3}, true}};
  auto out = s->infer_outputs(InferContext(a, in));
  ASSERT_TRUE(out.is_ok());
  OpCall call{s, &a, in, *out};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, {3, 3})};
    ASSERT_TRUE(op_test::run_engine(call, b, {*Tensor::empty(DataType::kFloat32, {3, 3})}, dst).is_ok());
    const double want[] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
    for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(dst[0].at(i), want[i]) << backend_name(b) << " " << i;
  }
}

}  // namespace
}  // namespace kiln
