#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/reduce/reduce.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }
TensorDesc i64(Dims d) { return {DataType::kInt64, d, true}; }

ReduceAttrs red(ReduceOp op, bool keep = true, std::vector<int64_t> axes = {}, bool noop = false) {
  ReduceAttrs a;
  a.op = op;
  a.keep_dims = keep;
  a.axes = std::move(axes);
  a.noop_with_empty_axes = noop;
  return a;
}

Tensor axes_tensor(std::vector<int64_t> axes) {
  auto t = *Tensor::empty(DataType::kInt64, {static_cast<int64_t>(axes.size())});
  for (size_t i = 0; i < axes.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(axes[i]));
  return t;
}

Result<std::vector<TensorDesc>> infer(const ReduceAttrs& a, TensorDesc x, const Tensor* axes = nullptr,
                                      TensorDesc axes_desc = TensorDesc::absent()) {
  std::vector<TensorDesc> in{x};
  std::vector<const Tensor*> values{nullptr};
  if (axes || axes_desc.present) {
    in.push_back(axes ? TensorDesc{axes->dtype(), axes->dims(), true} : axes_desc);
    values.push_back(axes);
  }
  return OpRegistry::global().find("Reduce")->infer_outputs(InferContext(a, in, values));
}

Dims out_dims(const ReduceAttrs& a, TensorDesc x, const Tensor* axes = nullptr) {
  auto r = infer(a, x, axes);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? (*r)[0].dims : Dims{-2};
}

TEST(ReduceSchema, Shapes) {
  const TensorDesc x = f32({3, 4, 5});
  const Tensor ax1 = axes_tensor({1}), ax02 = axes_tensor({0, -1}), none = axes_tensor({});
  EXPECT_EQ(out_dims(red(ReduceOp::kSum), x, &ax1), (Dims{3, 1, 5}));
  EXPECT_EQ(out_dims(red(ReduceOp::kSum, false), x, &ax02), (Dims{4}));
  EXPECT_EQ(out_dims(red(ReduceOp::kMean, false), x), (Dims{}));
  EXPECT_EQ(out_dims(red(ReduceOp::kMean, true), x), (Dims{1, 1, 1}));
  EXPECT_EQ(out_dims(red(ReduceOp::kMax, false, {}, true), x, &none), (Dims{3, 4, 5}));
  EXPECT_EQ(out_dims(red(ReduceOp::kMax, false), x, &none), (Dims{}));
  EXPECT_EQ(out_dims(red(ReduceOp::kL2, false, {-2}), x), (Dims{3, 5}));
  EXPECT_EQ(out_dims(red(ReduceOp::kSum, false), f32({})), (Dims{}));
  // Axes unknown until run time.
  auto r = infer(red(ReduceOp::kSum), x, nullptr, i64({2}));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{kDynamicDim, kDynamicDim, kDynamicDim}));
  r = infer(red(ReduceOp::kSum, false), x, nullptr, i64({2}));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{kDynamicDim}));
  r = infer(red(ReduceOp::kSum, false), x, nullptr, i64({kDynamicDim}));
  EXPECT_FALSE(r.is_ok());
}

TEST(ReduceSchema, Errors) {
  const TensorDesc x = f32({3, 4, 5});
  const Tensor bad = axes_tensor({3}), dup = axes_tensor({1, -2});
  auto r = infer(red(ReduceOp::kSum), x, &bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("axis 3 is out of range"), std::string::npos);
  r = infer(red(ReduceOp::kSum), x, &dup);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("appears twice"), std::string::npos);
  const Tensor ax = axes_tensor({0});
  r = infer(red(ReduceOp::kSum, true, {1}), x, &ax);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not both"), std::string::npos);
  r = infer(red(ReduceOp::kSum), x, nullptr, f32({1}));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'axes' must be int64"), std::string::npos);
  r = infer(red(ReduceOp::kSum), x, nullptr, i64({1, 1}));
  EXPECT_FALSE(r.is_ok());
  r = infer(red(ReduceOp::kLogSumExp), {DataType::kInt32, {3}, true});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("int32"), std::string::npos);
  EXPECT_TRUE(infer(red(ReduceOp::kMax), {DataType::kUInt8, {3}, true}).is_ok());
  EXPECT_FALSE(infer(red(ReduceOp::kSum), {DataType::kUInt8, {3}, true}).is_ok());
  EXPECT_FALSE(infer(red(ReduceOp::kSum, true, {0}), f32({})).is_ok());
}

TEST(ArgReduceSchema, ShapesAndErrors) {
  ArgReduceAttrs a;
  a.axis = -1;
  a.keep_dims = false;
  std::vector<TensorDesc> in{f32({3, 4})};
  const OpSchema* s = OpRegistry::global().find("ArgReduce");
  auto r = s->infer_outputs(InferContext(a, in));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{3}));
  EXPECT_EQ((*r)[0].dtype, DataType::kInt64);
  a.axis = 2;
  r = s->infer_outputs(InferContext(a, in));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("axis 2 is out of range"), std::string::npos);
  a.axis = 0;
  in = {f32({0, 4})};
  r = s->infer_outputs(InferContext(a, in));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("empty"), std::string::npos);
  in = {f32({})};
  EXPECT_FALSE(s->infer_outputs(InferContext(a, in)).is_ok());
}

TEST(ReduceKernels, HandComputedValues) {
  // x = [[1, -2, 3], [-4, 5, -6]] reduced over axis 1.
  const double xs[] = {1, -2, 3, -4, 5, -6};
  struct Want {
    ReduceOp op;
    double row0, row1;
  } wants[] = {{ReduceOp::kSum, 2, -5},
               {ReduceOp::kProd, -6, 120},
               {ReduceOp::kMax, 3, 5},
               {ReduceOp::kMin, -2, -6},
               {ReduceOp::kMean, 2.0 / 3, -5.0 / 3},
               {ReduceOp::kL1, 6, 15},
               {ReduceOp::kL2, std::sqrt(14.0), std::sqrt(77.0)},
               {ReduceOp::kSumSquare, 14, 77},
               {ReduceOp::kLogSumExp, std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
                std::log(std::exp(-4.0) + std::exp(5.0) + std::exp(-6.0))}};
  for (const Want& w : wants) {
    ReduceAttrs a = red(w.op, false, {1});
    OpCall call{OpRegistry::global().find("Reduce"), &a, {f32({2, 3})}, {f32({2})}};
    for (Backend b : {Backend::kRef, Backend::kCpu}) {
      auto x = *Tensor::empty(DataType::kFloat32, {2, 3});
      for (int i = 0; i < 6; ++i) x.set(i, xs[i]);
      std::vector<Tensor> y{*Tensor::empty(DataType::kFloat32, {2})};
      ASSERT_TRUE(op_test::run_engine(call, b, {x}, y).is_ok());
      EXPECT_NEAR(y[0].at(0), w.row0, 1e-5) << enum_name(w.op) << " on " << backend_name(b);
      EXPECT_NEAR(y[0].at(1), w.row1, 1e-5) << enum_name(w.op) << " on " << backend_name(b);
    }
  }
}

TEST(ReduceKernels, ArgMaxTies) {
  ArgReduceAttrs a;
  a.axis = 0;
  a.keep_dims = false;
  for (bool last : {false, true}) {
    a.select_last_index = last;
    OpCall call{OpRegistry::global().find("ArgReduce"), &a, {{DataType::kInt32, {4}, true}}, {i64({})}};
    for (Backend b : {Backend::kRef, Backend::kCpu}) {
      auto x = *Tensor::empty(DataType::kInt32, {4});
      const double xs[] = {1, 7, 3, 7};
      for (int i = 0; i < 4; ++i) x.set(i, xs[i]);
      std::vector<Tensor> y{*Tensor::empty(DataType::kInt64, {})};
      ASSERT_TRUE(op_test::run_engine(call, b, {x}, y).is_ok());
      EXPECT_EQ(y[0].at(0), last ? 3.0 : 1.0) << backend_name(b);
    }
  }
}

}  // namespace
}  // namespace kiln
