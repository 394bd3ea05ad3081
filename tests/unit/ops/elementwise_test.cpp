#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/elementwise/elementwise.h"

namespace kiln {
namespace {

using D = DataType;
using O = ElementWiseOp;

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& attrs, std::vector<TensorDesc> inputs) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(attrs, inputs));
}

std::string error_of(const char* op, const Attrs& attrs, std::vector<TensorDesc> inputs) {
  auto r = infer(op, attrs, std::move(inputs));
  return r.is_ok() ? "(no error)" : r.status().message();
}

Tensor make(D dtype, Dims dims, std::vector<double> values) {
  Tensor t = *Tensor::empty(dtype, dims);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

/// Runs `op` on `backend` and returns its output values.
std::vector<double> run(const char* op, const Attrs& attrs, std::vector<Tensor> src, Backend backend) {
  OpCall call{OpRegistry::global().find(op), &attrs, {}, {}};
  for (const Tensor& t : src) call.inputs.push_back({t.dtype(), t.dims(), true});
  auto outs = call.schema->infer_outputs(InferContext(attrs, call.inputs));
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  if (!outs.is_ok()) return {};
  call.outputs = *outs;
  std::vector<Tensor> dst{*Tensor::empty(call.outputs[0].dtype, call.outputs[0].dims)};
  Status s = op_test::run_engine(call, backend, src, dst);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<double> out;
  for (int64_t i = 0; i < dst[0].numel(); ++i) out.push_back(dst[0].at(i));
  return out;
}

constexpr Backend kBackends[] = {Backend::kRef, Backend::kCpu};

TEST(ElementWiseInfer, BroadcastsAndOutputDtypes) {
  auto r = infer("ElementWise", elementwise_attrs(O::kSum), {{D::kFloat32, {4, 1, 5}}, {D::kFloat32, {3, 1}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{4, 3, 5}));
  EXPECT_EQ((*r)[0].dtype, D::kFloat32);
  r = infer("ElementWise", elementwise_attrs(O::kLess), {{D::kInt32, {}}, {D::kInt32, {7}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{7}));
  EXPECT_EQ((*r)[0].dtype, D::kBool);
  r = infer("ElementWise", elementwise_attrs(O::kPow), {{D::kFloat16, {2, 3}}, {D::kInt64, {3}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dtype, D::kFloat16);
  r = infer("ElementWise", elementwise_attrs(O::kProd), {{D::kFloat32, {kDynamicDim, 3}}, {D::kFloat32, {1, 3}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{kDynamicDim, 3}));
}

TEST(ElementWiseInfer, ErrorsNameTheProblem) {
  std::string e = error_of("ElementWise", elementwise_attrs(O::kSum), {{D::kFloat32, {4, 3}}, {D::kFloat32, {4}}});
  EXPECT_NE(e.find("cannot be broadcast"), std::string::npos) << e;
  EXPECT_NE(e.find("[4, 3]"), std::string::npos) << e;
  EXPECT_NE(e.find("b [4]"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kSum), {{D::kFloat32, {2}}, {D::kInt32, {2}}});
  EXPECT_NE(e.find("float32 and int32"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kMod), {{D::kFloat32, {2}}, {D::kFloat32, {2}}});
  EXPECT_NE(e.find("fmod = true"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kAnd), {{D::kInt32, {2}}, {D::kInt32, {2}}});
  EXPECT_NE(e.find("needs bool inputs"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kSum), {{D::kBool, {2}}, {D::kBool, {2}}});
  EXPECT_NE(e.find("numeric"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kPow), {{D::kInt8, {2}}, {D::kInt8, {2}}});
  EXPECT_NE(e.find("base"), std::string::npos) << e;
  e = error_of("ElementWise", elementwise_attrs(O::kBitShiftLeft), {{D::kInt32, {2}}, {D::kInt32, {2}}});
  EXPECT_NE(e.find("uint8"), std::string::npos) << e;
  ElementWiseAttrs bad;
  bad.op = static_cast<O>(99);
  e = error_of("ElementWise", bad, {{D::kFloat32, {2}}, {D::kFloat32, {2}}});
  EXPECT_NE(e.find("unknown value 99"), std::string::npos) << e;
  EXPECT_FALSE(infer("ElementWise", elementwise_attrs(O::kSum), {{D::kFloat32, {2}}}).is_ok());
}

TEST(ElementWiseKernels, IntegerDivisionAndModFollowOnnx) {
  for (Backend b : kBackends) {
    const Tensor a = make(D::kInt32, {4}, {7, -7, 7, -7});
    const Tensor d = make(D::kInt32, {4}, {3, 3, -3, -3});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kDiv), {a, d}, b), (std::vector<double>{2, -2, -2, 2}));
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kMod), {a, d}, b), (std::vector<double>{1, 2, -2, -1}));
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kMod, true), {a, d}, b), (std::vector<double>{1, -1, 1, -1}));
    const Tensor z = make(D::kInt64, {2}, {5, std::numeric_limits<int64_t>::min()});
    const Tensor zd = make(D::kInt64, {2}, {0, -1});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kDiv), {z, zd}, b),
              (std::vector<double>{0, static_cast<double>(std::numeric_limits<int64_t>::min())}));
  }
}

TEST(ElementWiseKernels, FloatModAndPow) {
  for (Backend b : kBackends) {
    const Tensor a = make(D::kFloat32, {2}, {-7.5, 7.5});
    const Tensor d = make(D::kFloat32, {2}, {2, -2});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kMod, true), {a, d}, b), (std::vector<double>{-1.5, 1.5}));
    const Tensor base = make(D::kInt32, {4}, {2, 2, -1, 3});
    const Tensor e = make(D::kInt64, {4}, {10, -1, -3, 0});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kPow), {base, e}, b), (std::vector<double>{1024, 0, -1, 1}));
    const Tensor fb = make(D::kFloat32, {2}, {2, -2});
    const Tensor ie = make(D::kInt32, {}, {3});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kPow), {fb, ie}, b), (std::vector<double>{8, -8}));
  }
}

TEST(ElementWiseKernels, ComparisonsLogicShifts) {
  for (Backend b : kBackends) {
    const Tensor a = make(D::kFloat32, {3}, {1, 2, 3});
    const Tensor c = make(D::kFloat32, {}, {2});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kLess), {a, c}, b), (std::vector<double>{1, 0, 0}));
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kGreaterOrEqual), {c, a}, b), (std::vector<double>{1, 1, 0}));
    const Tensor p = make(D::kBool, {4}, {0, 0, 1, 1});
    const Tensor q = make(D::kBool, {4}, {0, 1, 0, 1});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kXor), {p, q}, b), (std::vector<double>{0, 1, 1, 0}));
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kAnd), {p, q}, b), (std::vector<double>{0, 0, 0, 1}));
    const Tensor u = make(D::kUInt8, {3}, {255, 16, 16});
    const Tensor s = make(D::kUInt8, {3}, {1, 4, 8});
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kBitShiftLeft), {u, s}, b), (std::vector<double>{254, 0, 0}));
    EXPECT_EQ(run("ElementWise", elementwise_attrs(O::kBitShiftRight), {u, s}, b), (std::vector<double>{127, 1, 0}));
  }
}

TEST(ElementWiseKernels, MaxPropagatesNaN) {
  const Tensor a = make(D::kFloat32, {2}, {std::nan(""), 1});
  const Tensor c = make(D::kFloat32, {2}, {0, std::nan("")});
  auto r = run("ElementWise", elementwise_attrs(O::kMax), {a, c}, Backend::kRef);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
}

TEST(WhereInfer, BroadcastsThreeWaysAndChecksDtypes) {
  NoAttrs none;
  auto r = infer("Where", none, {{D::kBool, {3, 1, 1}}, {D::kInt64, {1, 4, 1}}, {D::kInt64, {5}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dims, (Dims{3, 4, 5}));
  EXPECT_EQ((*r)[0].dtype, D::kInt64);
  std::string e = error_of("Where", none, {{D::kFloat32, {3}}, {D::kFloat32, {3}}, {D::kFloat32, {3}}});
  EXPECT_NE(e.find("bool condition"), std::string::npos) << e;
  e = error_of("Where", none, {{D::kBool, {3}}, {D::kFloat32, {3}}, {D::kInt32, {3}}});
  EXPECT_NE(e.find("float32 and int32"), std::string::npos) << e;
  e = error_of("Where", none, {{D::kBool, {3}}, {D::kFloat32, {3}}, {D::kFloat32, {4}}});
  EXPECT_NE(e.find("y [4]"), std::string::npos) << e;
}

TEST(WhereKernels, Selects) {
  NoAttrs none;
  for (Backend b : kBackends) {
    const Tensor c = make(D::kBool, {2, 1}, {1, 0});
    const Tensor x = make(D::kInt32, {3}, {1, 2, 3});
    const Tensor y = make(D::kInt32, {}, {-1});
    EXPECT_EQ(run("Where", none, {c, x, y}, b), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  }
}

TEST(CastInfer, ChecksTarget) {
  auto r = infer("Cast", cast_to(D::kInt8), {{D::kFloat32, {2, 3}}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].dtype, D::kInt8);
  EXPECT_EQ((*r)[0].dims, (Dims{2, 3}));
  std::string e = error_of("Cast", cast_to(D::kFp8E4M3), {{D::kFloat32, {2}}});
  EXPECT_NE(e.find("attribute to"), std::string::npos) << e;
}

TEST(CastKernels, FollowOnnxRules) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (Backend b : kBackends) {
    const Tensor f = make(D::kFloat32, {7}, {-1.7, 2.9, 300.7, nan, inf, -0.0, -1.5});
    EXPECT_EQ(run("Cast", cast_to(D::kInt8), {f}, b), (std::vector<double>{-1, 2, 44, 0, 0, 0, -1}));
    EXPECT_EQ(run("Cast", cast_to(D::kUInt8), {f}, b), (std::vector<double>{255, 2, 44, 0, 0, 0, 255}));
    EXPECT_EQ(run("Cast", cast_to(D::kInt64), {f}, b),
              (std::vector<double>{-1, 2, 300, -9223372036854775808.0, -9223372036854775808.0, 0, -1}));
    EXPECT_EQ(run("Cast", cast_to(D::kBool), {f}, b), (std::vector<double>{1, 1, 1, 1, 1, 0, 1}));
    const Tensor i = make(D::kInt32, {3}, {200, -129, 70000});
    EXPECT_EQ(run("Cast", cast_to(D::kInt8), {i}, b), (std::vector<double>{-56, 127, 112}));
    EXPECT_EQ(run("Cast", cast_to(D::kFloat16), {i}, b), (std::vector<double>{200, -129, inf}));
    const Tensor bo = make(D::kBool, {2}, {1, 0});
    EXPECT_EQ(run("Cast", cast_to(D::kFloat32), {bo}, b), (std::vector<double>{1, 0}));
    const Tensor h = make(D::kFloat32, {2}, {1.00048828125, 1.000732421875});  // ties in float16
    EXPECT_EQ(run("Cast", cast_to(D::kFloat16), {h}, b), (std::vector<double>{1.0, 1.0009765625}));
  }
}

}  // namespace
}  // namespace kiln
