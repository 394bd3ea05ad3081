#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/trilu/trilu.h"

namespace kiln {
namespace {

std::string error_of(TensorDesc x, TensorDesc k = TensorDesc::absent()) {
  TriluAttrs a;
  std::vector<TensorDesc> in{x, k};
  auto r = OpRegistry::global().find("Trilu")->infer_outputs(InferContext(a, in));
  return r.is_ok() ? "(no error)" : r.status().message();
}

TEST(TriluInfer, Errors) {
  EXPECT_EQ(error_of({DataType::kInt8, {2, 3, 4}, true}), "(no error)");
  EXPECT_NE(error_of({DataType::kFloat32, {4}, true}).find("rank >= 2"), std::string::npos);
  EXPECT_NE(error_of({DataType::kFloat32, {4, 4}, true}, {DataType::kFloat32, {}, true}).find("must be int64"),
            std::string::npos);
  EXPECT_NE(error_of({DataType::kFloat32, {4, 4}, true}, {DataType::kInt64, {2}, true}).find("scalar"),
            std::string::npos);
}

TEST(TriluKernels, LowerWithK) {
  for (Backend backend : {Backend::kRef, Backend::kCpu}) {
    TriluAttrs a;
    a.upper = false;
    Tensor x = *Tensor::empty(DataType::kInt32, {3, 3});
    for (int i = 0; i < 9; ++i) x.set(i, i + 1);
    Tensor k = *Tensor::empty(DataType::kInt64, {});
    k.set(0, -1);
    OpCall call{OpRegistry::global().find("Trilu"),
                &a,
                {{DataType::kInt32, {3, 3}, true}, {DataType::kInt64, {}, true}},
                {{DataType::kInt32, {3, 3}, true}}};
    std::vector<Tensor> dst{*Tensor::empty(DataType::kInt32, {3, 3})};
    ASSERT_TRUE(op_test::run_engine(call, backend, {x, k}, dst).is_ok());
    const double want[] = {0, 0, 0, 4, 0, 0, 7, 8, 0};
    for (int i = 0; i < 9; ++i) EXPECT_EQ(dst[0].at(i), want[i]) << backend_name(backend) << " " << i;
  }
}

}  // namespace
}  // namespace kiln
