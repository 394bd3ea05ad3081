#include <gtest/gtest.h>

#include <cstring>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/indexing/indexing.h"

namespace kiln {
namespace {

using namespace op_test;

Tensor floats(Dims dims, std::vector<float> v) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

Tensor int64s(Dims dims, std::vector<int64_t> v) {
  Tensor t = *Tensor::empty(DataType::kInt64, dims);
  std::memcpy(t.raw(), v.data(), v.size() * 8);
  return t;
}

TEST(Gather, ShapesAndValues) {
  GatherAttrs a;
  a.axis = -2;
  auto out = infer("Gather", a, {desc(DataType::kInt8, {4, 5, 6}), desc(DataType::kInt32, {2, 3})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0], desc(DataType::kInt8, {4, 2, 3, 6}));
  a.axis = 0;
  for (auto& [name, r] : run_all("Gather", a, {floats({3, 2}, {1, 2, 3, 4, 5, 6}), int64s({3}, {2, -3, -1})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {5, 6, 1, 2, 5, 6}, name);
  }
}

TEST(Gather, Errors) {
  GatherAttrs a;
  a.axis = 3;
  expect_error(infer("Gather", a, {desc(DataType::kFloat32, {2, 3}), desc(DataType::kInt64, {1})}), "'axis'");
  a.axis = 0;
  expect_error(infer("Gather", a, {desc(DataType::kFloat32, {2, 3}), desc(DataType::kFloat32, {1})}),
               "'indices' must be int32 or int64");
  expect_error(infer("Gather", a, {desc(DataType::kFloat32, {}), desc(DataType::kInt64, {1})}), "rank >= 1");
  expect_error(infer("Gather", a, {desc(DataType::kFloat32, {2, 2, 2, 2, 2}), desc(DataType::kInt64, {1, 1, 1, 1, 1})}),
               "rank 9");
}

TEST(Indexing, OutOfRangeIndicesAreErrorsOnEveryBackend) {
  const Tensor data = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  GatherAttrs g;
  for (auto& [name, r] : run_all("Gather", g, {data, int64s({2}, {0, 3})})) {
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find("Gather: index 3 is out of range for axis 0 of size 3 (valid: -3..2)"),
              std::string::npos)
        << name << ": " << r.status().message();
  }
  for (auto& [name, r] : run_all("Gather", g, {data, int64s({1}, {-4})})) EXPECT_FALSE(r.is_ok()) << name;
  GatherElementsAttrs ge;
  ge.axis = 1;
  for (auto& [name, r] : run_all("GatherElements", ge, {data, int64s({3, 1}, {0, 2, 1})})) {
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find("index 2"), std::string::npos) << name << ": " << r.status().message();
  }
  GatherNDAttrs gn;
  for (auto& [name, r] : run_all("GatherND", gn, {data, int64s({1, 2}, {1, -3})})) {
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find("axis 1 of size 2"), std::string::npos) << name << ": " << r.status().message();
  }
  ScatterNDAttrs sn;
  for (auto& [name, r] : run_all("ScatterND", sn, {data, int64s({1, 1}, {5}), floats({1, 2}, {0, 0})}))
    EXPECT_FALSE(r.is_ok()) << name;
  ScatterElementsAttrs se;
  for (auto& [name, r] : run_all("ScatterElements", se, {data, int64s({1, 2}, {0, -9}), floats({1, 2}, {0, 0})})) {
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find("ScatterElements: index -9"), std::string::npos) << r.status().message();
  }
}

TEST(GatherElementsAndND, ShapesAndValues) {
  GatherElementsAttrs ge;
  ge.axis = 1;
  auto out = infer("GatherElements", ge, {desc(DataType::kFloat32, {3, 4}), desc(DataType::kInt64, {2, 7})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0].dims, (Dims{2, 7}));
  expect_error(infer("GatherElements", ge, {desc(DataType::kFloat32, {3, 4}), desc(DataType::kInt64, {4, 2})}),
               "'indices' dim 0 is 4");
  expect_error(infer("GatherElements", ge, {desc(DataType::kFloat32, {3, 4}), desc(DataType::kInt64, {3})}),
               "rank of 'data'");
  for (auto& [name, r] : run_all("GatherElements", ge, {floats({2, 2}, {1, 2, 3, 4}), int64s({2, 2}, {0, 0, 1, 0})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {1, 1, 4, 3}, name);
  }

  GatherNDAttrs gn;
  gn.batch_dims = 1;
  out = infer("GatherND", gn, {desc(DataType::kFloat32, {2, 3, 4}), desc(DataType::kInt64, {2, 5, 1})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0].dims, (Dims{2, 5, 4}));
  expect_error(infer("GatherND", gn, {desc(DataType::kFloat32, {2, 3, 4}), desc(DataType::kInt64, {3, 5, 1})}),
               "batch dim 0 differs");
  expect_error(infer("GatherND", gn, {desc(DataType::kFloat32, {2, 3, 4}), desc(DataType::kInt64, {2, 3})}),
               "last dim is 3");
  gn.batch_dims = 2;
  expect_error(infer("GatherND", gn, {desc(DataType::kFloat32, {2, 3}), desc(DataType::kInt64, {2, 1})}),
               "'batch_dims' is 2");
  gn.batch_dims = 1;
  // ONNX example: batch_dims = 1, data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]] -> [[2,3],[4,5]].
  for (auto& [name, r] :
       run_all("GatherND", gn, {floats({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), int64s({2, 1}, {1, 0})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {2, 3, 4, 5}, name);
  }
}

TEST(Scatter, ShapesAndValues) {
  ScatterNDAttrs sn;
  expect_error(
      infer("ScatterND", sn,
            {desc(DataType::kFloat32, {4, 5}), desc(DataType::kInt64, {3, 1}), desc(DataType::kFloat32, {3, 4})}),
      "must have shape [3, 5]");
  expect_error(infer("ScatterND", sn,
                     {desc(DataType::kFloat32, {4, 5}), desc(DataType::kInt64, {3, 3}), desc(DataType::kFloat32, {3})}),
               "last dim is 3");
  expect_error(infer("ScatterND", sn,
                     {desc(DataType::kFloat32, {4}), desc(DataType::kInt64, {1, 1}), desc(DataType::kInt32, {1})}),
               "'updates' is int32");
  // ONNX example: data [1..8], indices [[4],[3],[1],[7]], updates [9,10,11,12].
  sn.reduction = ScatterReduction::kNone;
  const Tensor data = floats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  for (auto& [name, r] : run_all("ScatterND", sn, {data, int64s({4, 1}, {4, 3, 1, 7}), floats({4}, {9, 10, 11, 12})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {1, 11, 3, 10, 9, 6, 7, 12}, name);
  }
  sn.reduction = ScatterReduction::kMul;
  for (auto& [name, r] : run_all("ScatterND", sn, {data, int64s({2, 1}, {1, -7}), floats({2}, {3, 5})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {1, 30, 3, 4, 5, 6, 7, 8}, name);
  }

  ScatterElementsAttrs se;
  se.axis = 1;
  se.reduction = ScatterReduction::kAdd;
  expect_error(
      infer("ScatterElements", se,
            {desc(DataType::kFloat32, {2, 3}), desc(DataType::kInt64, {2, 2}), desc(DataType::kFloat32, {2, 1})}),
      "must equal the 'indices' shape");
  // Faster R-CNN's box_roi_pool: unknown dims agree with anything at build time, and are checked at run time.
  auto dyn = infer("ScatterElements", ScatterElementsAttrs{},
                   {desc(DataType::kFloat32, {kDynamicDim, 256, 7, 7}),
                    desc(DataType::kInt64, {kDynamicDim, kDynamicDim, kDynamicDim, kDynamicDim}),
                    desc(DataType::kFloat32, {kDynamicDim, 256, 7, 7})});
  ASSERT_TRUE(dyn.is_ok()) << dyn.status().message();
  expect_error(infer("ScatterElements", se,
                     {desc(DataType::kFloat32, {2, 3}), desc(DataType::kInt64, {kDynamicDim, 2}),
                      desc(DataType::kFloat32, {2, 1})}),
               "must equal the 'indices' shape");
  // ONNX example with reduction add: data [[1,2,3,4,5]], indices [[1,1]], updates [[1.1,2.1]].
  for (auto& [name, r] :
       run_all("ScatterElements", se,
               {floats({1, 5}, {1, 2, 3, 4, 5}), int64s({1, 2}, {1, 1}), floats({1, 2}, {1.1f, 2.1f})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    EXPECT_NEAR((*r)[0].at(1), 5.2, 1e-6) << name;
    EXPECT_EQ((*r)[0].at(0), 1) << name;
  }
}

TEST(TopK, ShapesTiesAndErrors) {
  TopKAttrs a;
  const Tensor k3 = int64s({1}, {3});
  auto out = infer("TopK", a, {desc(DataType::kFloat32, {2, 6}), desc(DataType::kInt64, {1})}, {nullptr, &k3});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0], desc(DataType::kFloat32, {2, 3}));
  EXPECT_EQ((*out)[1], desc(DataType::kInt64, {2, 3}));
  out = infer("TopK", a, {desc(DataType::kFloat32, {2, 6}), desc(DataType::kInt64, {1})});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0].dims, (Dims{2, kDynamicDim}));
  const Tensor k9 = int64s({1}, {9});
  expect_error(infer("TopK", a, {desc(DataType::kFloat32, {2, 6}), desc(DataType::kInt64, {1})}, {nullptr, &k9}),
               "'k' is 9; it must be in [0, 6]");
  expect_error(infer("TopK", a, {desc(DataType::kFloat32, {2, 6}), desc(DataType::kInt64, {2})}), "shape [1]");
  expect_error(infer("TopK", a, {desc(DataType::kBool, {2, 6}), desc(DataType::kInt64, {1})}), "bool");

  // Ties keep the lower index first, for largest and smallest.
  const Tensor x = floats({6}, {1, 3, 3, 2, 3, 1});
  a.axis = 0;
  for (auto& [name, r] : run_all("TopK", a, {x, k3})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {3, 3, 3}, name);
    expect_values((*r)[1], {1, 2, 4}, name);
  }
  a.largest = false;
  for (auto& [name, r] : run_all("TopK", a, {x, k3})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {1, 1, 2}, name);
    expect_values((*r)[1], {0, 5, 3}, name);
  }
}

TEST(OneHot, ShapesValuesAndErrors) {
  OneHotAttrs a;
  a.axis = 0;
  const Tensor depth = int64s({}, {3});
  auto out =
      infer("OneHot", a, {desc(DataType::kInt64, {2}), desc(DataType::kInt64, {}), desc(DataType::kFloat32, {2})},
            {nullptr, &depth, nullptr});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ((*out)[0].dims, (Dims{3, 2}));
  const Tensor bad_depth = int64s({}, {0});
  expect_error(
      infer("OneHot", a, {desc(DataType::kInt64, {2}), desc(DataType::kInt64, {}), desc(DataType::kFloat32, {2})},
            {nullptr, &bad_depth, nullptr}),
      "'depth' is 0");
  expect_error(
      infer("OneHot", a, {desc(DataType::kInt64, {2}), desc(DataType::kInt64, {}), desc(DataType::kFloat32, {3})}),
      "'values' must have shape [2]");
  a.axis = -1;
  for (auto& [name, r] : run_all("OneHot", a, {int64s({3}, {2, -1, 7}), depth, floats({2}, {0, 5})})) {
    ASSERT_TRUE(r.is_ok()) << name;
    expect_values((*r)[0], {0, 0, 5, 0, 0, 5, 0, 0, 0}, name);
  }
}

}  // namespace
}  // namespace kiln
