// MLP's schema: shapes and the errors the harness cannot show.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "ops/mlp/mlp.h"

namespace kiln {
namespace {

using op_test::desc;
using op_test::expect_error;
using op_test::infer;

TensorDesc f32(Dims d) { return desc(DataType::kFloat32, d); }

MlpAttrs layers(int n) {
  MlpAttrs a;
  for (int i = 0; i < n; ++i) a.add_layer({true, ActivationKind::kRelu});
  return a;
}

TEST(MlpSchema, ShapesOverTheLastAxis) {
  auto r = infer("MLP", layers(2), {f32({2, 3, 8}), f32({16, 8}), f32({16}), f32({4, 16}), f32({4})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, Dims({2, 3, 4}));
}

TEST(MlpSchema, ErrorsNameTheLayer) {
  expect_error(infer("MLP", layers(2), {f32({2, 8}), f32({16, 8}), f32({16})}), "MLP with 2 layers takes 5 inputs");
  expect_error(infer("MLP", layers(2), {f32({2, 8}), f32({16, 8}), f32({16}), f32({4, 15}), f32({4})}),
               "MLP layer 1 weights must have shape [out, 16] but have shape [4, 15]");
  expect_error(infer("MLP", layers(1), {f32({2, 8}), f32({16, 8}), f32({15})}),
               "MLP layer 0 bias must have shape [16]");
  MlpAttrs bad = layers(1);
  bad.activation_kinds[0] = static_cast<int64_t>(ActivationKind::kPRelu);
  expect_error(infer("MLP", bad, {f32({2, 8}), f32({16, 8}), f32({16})}), "cannot apply PRelu");
  bad.activation_alphas.clear();
  expect_error(infer("MLP", bad, {f32({2, 8}), f32({16, 8}), f32({16})}), "give one of each per layer");
}

}  // namespace
}  // namespace kiln
