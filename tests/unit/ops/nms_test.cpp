#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/nms/nms.h"

namespace kiln {
namespace {

using namespace op_test;

constexpr auto kF32 = DataType::kFloat32;
constexpr auto kI64 = DataType::kInt64;

TEST(NonMaxSuppression, SuppressesByIou) {
  NmsAttrs a;
  const Tensor boxes = make(
      kF32, {1, 6, 4}, {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9, 0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100, 1, 101});
  const Tensor scores = make(kF32, {1, 1, 6}, {0.9, 0.75, 0.6, 0.95, 0.5, 0.3});
  const Tensor max_out = make(kI64, {1}, {3}), iou = make(kF32, {1}, {0.5}), score = make(kF32, {1}, {0});
  auto out = infer("NonMaxSuppression", a, {desc(kF32, {1, 6, 4}), desc(kF32, {1, 1, 6})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0], desc(kI64, {kDynamicDim, 3}));
  for (auto& [name, r] : run_all("NonMaxSuppression", a, {boxes, scores, max_out, iou, score})) {
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    expect_values((*r)[0], {0, 0, 3, 0, 0, 0, 0, 0, 5}, name);
  }
  for (auto& [name, r] : run_all("NonMaxSuppression", a, {boxes, scores})) {
    ASSERT_TRUE(r.is_ok()) << name;
    EXPECT_EQ((*r)[0].numel(), 0) << name << ": max_output_boxes_per_class defaults to 0";
  }
}

// torchvision writes INT64_MAX as max_output_boxes_per_class; through a double it became INT64_MIN.
TEST(NonMaxSuppression, Int64MaxKeepsEveryBox) {
  NmsAttrs a;
  const Tensor boxes = make(kF32, {1, 2, 4}, {0, 0, 1, 1, 0, 10, 1, 11});
  const Tensor scores = make(kF32, {1, 1, 2}, {0.9, 0.8});
  Tensor max_out = *Tensor::empty(kI64, {1});
  max_out.data<int64_t>()[0] = INT64_MAX;
  const Tensor iou = make(kF32, {1}, {0.5});
  for (auto& [name, r] : run_all("NonMaxSuppression", a, {boxes, scores, max_out, iou})) {
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    expect_values((*r)[0], {0, 0, 0, 0, 0, 1}, name);
  }
}

TEST(NonMaxSuppression, Errors) {
  NmsAttrs a;
  expect_error(infer("NonMaxSuppression", a, {desc(kF32, {1, 6, 3}), desc(kF32, {1, 1, 6})}), "[batches, boxes, 4]");
  expect_error(infer("NonMaxSuppression", a, {desc(kF32, {1, 6, 4}), desc(kF32, {1, 1, 5})}), "number of boxes");
  expect_error(infer("NonMaxSuppression", a, {desc(kF32, {1, 6, 4}), desc(kF32, {1, 6})}), "[batches, classes, boxes]");
  expect_error(infer("NonMaxSuppression", a, {desc(kF32, {1, 6, 4}), desc(kF32, {1, 1, 6}), desc(kF32, {1})}),
               "must be int64");
  const Tensor bad_iou = make(kF32, {1}, {1.5});
  const Tensor boxes = make(kF32, {1, 1, 4}, {0, 0, 1, 1}), scores = make(kF32, {1, 1, 1}, {1});
  const Tensor max_out = make(kI64, {1}, {1});
  auto r = run_all("NonMaxSuppression", a, {boxes, scores, max_out, bad_iou});
  ASSERT_FALSE(r.empty());
  ASSERT_FALSE(r[0].second.is_ok());
  EXPECT_NE(r[0].second.status().message().find("it must be in [0, 1]"), std::string::npos);
}

}  // namespace
}  // namespace kiln
