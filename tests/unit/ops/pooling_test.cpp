#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/pooling/pooling.h"

namespace kiln {
namespace {

PoolingAttrs pool(PoolingMode mode, std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                  std::vector<int64_t> pads = {}) {
  PoolingAttrs a;
  a.mode = mode;
  a.kernel_shape = std::move(kernel);
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  return a;
}

Result<std::vector<TensorDesc>> infer(const PoolingAttrs& a, Dims x, DataType dtype = DataType::kFloat32) {
  const OpSchema* s = OpRegistry::global().find("Pooling");
  std::vector<TensorDesc> in{{dtype, x, true}};
  return s->infer_outputs(InferContext(a, in));
}

Dims out_dims(const PoolingAttrs& a, Dims x) {
  auto r = infer(a, x);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? (*r)[0].dims : Dims{};
}

std::string error_of(const PoolingAttrs& a, Dims x, DataType dtype = DataType::kFloat32) {
  auto r = infer(a, x, dtype);
  return r.is_ok() ? "" : r.status().message();
}

Tensor make(Dims dims, std::vector<double> values, DataType dtype = DataType::kFloat32) {
  Tensor t = *Tensor::empty(dtype, dims);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor iota(Dims dims) {
  std::vector<double> v(static_cast<size_t>(dims.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return make(dims, v);
}

// Runs every ref and CPU implementation that accepts the problem (each a pinned one-node engine) and checks each
// output against `want`.
void expect_pool(const PoolingAttrs& a, const Tensor& x, const std::vector<double>& want,
                 const std::vector<double>& want_indices = {}) {
  int ran = 0;
  for (const auto& [name, result] : op_test::run_all("Pooling", a, {x})) {
    ASSERT_TRUE(result.is_ok()) << name << ": " << result.status().to_string();
    ++ran;
    const std::vector<Tensor>& dst = *result;
    ASSERT_EQ(dst[0].numel(), static_cast<int64_t>(want.size())) << name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(dst[0].at(static_cast<int64_t>(i)), want[i], 1e-5) << name << " element " << i;
    if (!want_indices.empty()) {
      ASSERT_EQ(dst.size(), 2u);
      for (size_t i = 0; i < want_indices.size(); ++i)
        EXPECT_EQ(dst[1].at(static_cast<int64_t>(i)), want_indices[i]) << name << " index " << i;
    }
  }
  EXPECT_GE(ran, 2) << "expected a reference and a CPU implementation";
}

TEST(PoolingInfer, OutputSizes) {
  EXPECT_EQ(out_dims(pool(PoolingMode::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1}), {2, 3, 7, 7}), (Dims{2, 3, 4, 4}));
  EXPECT_EQ(out_dims(pool(PoolingMode::kAverage, {3}, {2}), {1, 1, 6}), (Dims{1, 1, 2}));
  PoolingAttrs ceil = pool(PoolingMode::kAverage, {3}, {2});
  ceil.ceil_mode = true;
  EXPECT_EQ(out_dims(ceil, {1, 1, 6}), (Dims{1, 1, 3}));
  // ceil(5 / 2) + 1 = 4 windows, but the 4th would start in the right padding.
  PoolingAttrs drop = pool(PoolingMode::kMax, {2}, {2}, {1, 1});
  drop.ceil_mode = true;
  EXPECT_EQ(out_dims(drop, {1, 1, 5}), (Dims{1, 1, 3}));
  PoolingAttrs dil = pool(PoolingMode::kMax, {3, 2}, {1, 1});
  dil.dilations = {2, 3};
  EXPECT_EQ(out_dims(dil, {1, 1, 9, 9}), (Dims{1, 1, 5, 6}));
  PoolingAttrs same = pool(PoolingMode::kMax, {3, 2, 2}, {2, 2, 3});
  same.auto_pad = PoolingAutoPad::kSameUpper;
  EXPECT_EQ(out_dims(same, {1, 2, 7, 6, 7}), (Dims{1, 2, 4, 3, 3}));
  same.auto_pad = PoolingAutoPad::kValid;
  EXPECT_EQ(out_dims(same, {1, 2, 7, 6, 7}), (Dims{1, 2, 3, 3, 2}));
  PoolingAttrs global;
  global.global = true;
  EXPECT_EQ(out_dims(global, {2, 3, 5, 6, 7, 8}), (Dims{2, 3, 1, 1, 1, 1}));
  EXPECT_EQ(out_dims(pool(PoolingMode::kMax, {2}), {kDynamicDim, 3, kDynamicDim}), (Dims{kDynamicDim, 3, kDynamicDim}));
  PoolingAttrs idx = pool(PoolingMode::kMax, {2, 2});
  idx.return_indices = true;
  auto r = infer(idx, {1, 1, 4, 4});
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].dtype, DataType::kInt64);
  EXPECT_EQ((*r)[1].dims, (Dims{1, 1, 3, 3}));
}

TEST(PoolingInfer, SamePadsSplit) {
  PoolingAttrs a = pool(PoolingMode::kMax, {4}, {1});
  a.auto_pad = PoolingAutoPad::kSameUpper;
  auto g = pooling_geometry(a, {1, 1, 5});
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->pad_begin[0], 1);
  EXPECT_EQ(g->pad_end[0], 2);
  a.auto_pad = PoolingAutoPad::kSameLower;
  g = pooling_geometry(a, {1, 1, 5});
  EXPECT_EQ(g->pad_begin[0], 2);
  EXPECT_EQ(g->pad_end[0], 1);
}

TEST(PoolingInfer, Errors) {
  const PoolingAttrs k2 = pool(PoolingMode::kMax, {2, 2});
  EXPECT_NE(error_of(k2, {4, 4}).find("rank 3 to 5"), std::string::npos);
  EXPECT_NE(error_of(k2, {1, 1, 4}).find("kernel_shape [2, 2] must have 1 values"), std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2, 0}), {1, 1, 4, 4}).find("kernel_shape"), std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2, 2}, {0, 1}), {1, 1, 4, 4}).find("strides [0, 1]"), std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2, 2}, {}, {1, 1}), {1, 1, 4, 4}).find("pads [1, 1] must have 4"),
            std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2, 2}, {}, {2, 0, 0, 0}), {1, 1, 4, 4}).find("smaller than kernel"),
            std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2, 2}, {}, {-1, 0, 0, 0}), {1, 1, 4, 4}).find("pads"), std::string::npos);
  PoolingAttrs same = pool(PoolingMode::kMax, {2, 2}, {}, {1, 0, 0, 0});
  same.auto_pad = PoolingAutoPad::kSameUpper;
  EXPECT_NE(error_of(same, {1, 1, 4, 4}).find("cannot be combined with auto_pad SAME_UPPER"), std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {5}), {1, 1, 4}).find("larger than the padded input"), std::string::npos);
  PoolingAttrs idx = pool(PoolingMode::kAverage, {2});
  idx.return_indices = true;
  EXPECT_NE(error_of(idx, {1, 1, 4}).find("return_indices needs mode max"), std::string::npos);
  EXPECT_NE(error_of(pool(PoolingMode::kAverage, {2}), {1, 1, 4}, DataType::kInt8).find("floating-point"),
            std::string::npos);
  EXPECT_EQ(error_of(pool(PoolingMode::kMax, {2}), {1, 1, 4}, DataType::kInt8), "");
  EXPECT_NE(error_of(pool(PoolingMode::kMax, {2}), {1, 1, 4}, DataType::kInt32).find("int32"), std::string::npos);
  PoolingAttrs lp = pool(PoolingMode::kLp, {2});
  lp.p = 0;
  EXPECT_NE(error_of(lp, {1, 1, 4}).find("p = 0"), std::string::npos);
  PoolingAttrs global = pool(PoolingMode::kMax, {2});
  global.global = true;
  EXPECT_NE(error_of(global, {1, 1, 4}).find("global Pooling takes no kernel_shape"), std::string::npos);
  PoolingAttrs huge = pool(PoolingMode::kMax, {int64_t{1} << 40});
  EXPECT_NE(error_of(huge, {1, 1, 4}).find("kernel_shape"), std::string::npos);
}

TEST(PoolingValues, MaxWithIndices) {
  PoolingAttrs a = pool(PoolingMode::kMax, {2, 2}, {2, 2});
  expect_pool(a, iota({1, 1, 4, 4}), {6, 8, 14, 16});
  a.return_indices = true;
  // Indices are flat over the whole input, batch and channel included.
  expect_pool(a, iota({1, 2, 4, 4}), {6, 8, 14, 16, 22, 24, 30, 32}, {5, 7, 13, 15, 21, 23, 29, 31});
  // Ties: the first maximum in row-major window order wins; padding never does.
  PoolingAttrs t = pool(PoolingMode::kMax, {3}, {1}, {1, 1});
  t.return_indices = true;
  expect_pool(t, make({1, 1, 4}, {-5, -5, -7, -5}), {-5, -5, -5, -5}, {0, 0, 1, 3});
}

TEST(PoolingValues, AveragePadding) {
  PoolingAttrs a = pool(PoolingMode::kAverage, {3, 3}, {1, 1}, {1, 1, 1, 1});
  const Tensor x = iota({1, 1, 3, 3});
  expect_pool(a, x, {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
  a.count_include_pad = true;
  expect_pool(a, x, {12. / 9, 21. / 9, 16. / 9, 27. / 9, 45. / 9, 33. / 9, 24. / 9, 39. / 9, 28. / 9});
  // Ceil mode: the last window hangs past the input; the overhang is not padding, so not counted.
  PoolingAttrs c = pool(PoolingMode::kAverage, {2}, {2});
  c.ceil_mode = true;
  c.count_include_pad = true;
  expect_pool(c, iota({1, 1, 5}), {1.5, 3.5, 5});
  // Explicit padding is counted: windows [pad, 1], [2, 3], [4, 5]; a 4th would start in the right padding.
  PoolingAttrs cp = pool(PoolingMode::kAverage, {2}, {2}, {1, 1});
  cp.ceil_mode = true;
  cp.count_include_pad = true;
  expect_pool(cp, iota({1, 1, 5}), {0.5, 2.5, 4.5});
}

TEST(PoolingValues, LpAndGlobal) {
  PoolingAttrs a = pool(PoolingMode::kLp, {2}, {2});
  expect_pool(a, make({1, 1, 4}, {3, -4, 0, 1}), {5, 1});
  a.p = 1;
  expect_pool(a, make({1, 1, 4}, {3, -4, 0, 1}), {7, 1});
  PoolingAttrs g;
  g.global = true;
  g.mode = PoolingMode::kAverage;
  expect_pool(g, iota({1, 2, 2, 2}), {2.5, 6.5});
  g.mode = PoolingMode::kMax;
  g.return_indices = true;
  expect_pool(g, make({1, 2, 3}, {1, 9, 2, 4, 3, 8}), {9, 8}, {1, 5});
}

TEST(PoolingValues, DilationAndInt8) {
  PoolingAttrs a = pool(PoolingMode::kMax, {2}, {1});
  a.dilations = {3};
  expect_pool(a, make({1, 1, 5}, {1, 5, 2, 4, 3}), {4, 5});
  PoolingAttrs i8 = pool(PoolingMode::kMax, {2}, {2});
  expect_pool(i8, make({1, 1, 4}, {-100, -3, 7, 100}, DataType::kInt8), {-3, 100});
}

}  // namespace
}  // namespace kiln
