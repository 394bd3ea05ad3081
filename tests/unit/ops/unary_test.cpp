#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/unary/unary.h"

namespace kiln {
namespace {

using D = DataType;
using O = UnaryOp;

Result<std::vector<TensorDesc>> infer(const UnaryAttrs& attrs, TensorDesc x) {
  std::vector<TensorDesc> in{x};
  return OpRegistry::global().find("Unary")->infer_outputs(InferContext(attrs, in));
}

std::string error_of(const UnaryAttrs& attrs, TensorDesc x) {
  auto r = infer(attrs, x);
  return r.is_ok() ? "(no error)" : r.status().message();
}

std::vector<double> run(const UnaryAttrs& attrs, D dtype, std::vector<double> values, Backend backend) {
  Tensor x = *Tensor::empty(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) x.set(static_cast<int64_t>(i), values[i]);
  OpCall call{OpRegistry::global().find("Unary"), &attrs, {{dtype, x.dims(), true}}, {}};
  call.outputs = *infer(attrs, call.inputs[0]);
  std::vector<Tensor> dst{*Tensor::empty(call.outputs[0].dtype, call.outputs[0].dims)};
  Status s = op_test::run_engine(call, backend, {x}, dst);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<double> out;
  for (int64_t i = 0; i < dst[0].numel(); ++i) out.push_back(dst[0].at(i));
  return out;
}

constexpr Backend kBackends[] = {Backend::kRef, Backend::kCpu};

TEST(UnaryInfer, DtypesPerOp) {
  auto r = infer(unary_attrs(O::kIsNan), {D::kFloat16, {2, 3}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dtype, D::kBool);
  EXPECT_EQ((*r)[0].dims, (Dims{2, 3}));
  r = infer(unary_attrs(O::kAbs), {D::kInt64, {}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dtype, D::kInt64);
  std::string e = error_of(unary_attrs(O::kLog), {D::kInt32, {2}});
  EXPECT_NE(e.find("log needs a floating-point input, got int32"), std::string::npos) << e;
  e = error_of(unary_attrs(O::kNeg), {D::kUInt8, {2}});
  EXPECT_NE(e.find("signed"), std::string::npos) << e;
  e = error_of(unary_attrs(O::kNot), {D::kFloat32, {2}});
  EXPECT_NE(e.find("bool"), std::string::npos) << e;
  UnaryAttrs bad;
  bad.op = static_cast<O>(-3);
  e = error_of(bad, {D::kFloat32, {2}});
  EXPECT_NE(e.find("unknown value -3"), std::string::npos) << e;
}

TEST(UnaryKernels, RoundHalfToEven) {
  for (Backend b : kBackends)
    EXPECT_EQ(run(unary_attrs(O::kRound), D::kFloat32, {0.5, 1.5, 2.5, -0.5, -2.5, 2.6}, b),
              (std::vector<double>{0, 2, 2, 0, -2, 3}));
}

TEST(UnaryKernels, IntegerAbsNegSign) {
  for (Backend b : kBackends) {
    EXPECT_EQ(run(unary_attrs(O::kAbs), D::kInt8, {-128, -5, 7}, b), (std::vector<double>{-128, 5, 7}));
    EXPECT_EQ(run(unary_attrs(O::kNeg), D::kInt32, {-2147483648.0, 3}, b), (std::vector<double>{-2147483648.0, -3}));
    EXPECT_EQ(run(unary_attrs(O::kSign), D::kInt64, {-9, 0, 4}, b), (std::vector<double>{-1, 0, 1}));
  }
}

TEST(UnaryKernels, IsInfFlagsAndNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  for (Backend b : kBackends) {
    UnaryAttrs pos = unary_attrs(O::kIsInf);
    pos.detect_negative = false;
    EXPECT_EQ(run(pos, D::kFloat32, {inf, -inf, 1, std::nan("")}, b), (std::vector<double>{1, 0, 0, 0}));
    EXPECT_EQ(run(unary_attrs(O::kIsNan), D::kFloat32, {inf, std::nan(""), 0}, b), (std::vector<double>{0, 1, 0}));
    auto e = run(unary_attrs(O::kExp), D::kFloat32, {std::nan(""), 0, -inf}, b);
    ASSERT_EQ(e.size(), 3u);
    EXPECT_TRUE(std::isnan(e[0]));
    EXPECT_EQ(e[1], 1);
    EXPECT_EQ(e[2], 0);
  }
}

}  // namespace
}  // namespace kiln
