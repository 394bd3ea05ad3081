#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/constant/constant.h"

namespace kiln {
namespace {

TEST(Constant, Base64KnownVectors) {
  EXPECT_EQ(base64_encode("Man", 3), "TWFu");
  EXPECT_EQ(base64_encode("Ma", 2), "TWE=");
  EXPECT_EQ(base64_encode("M", 1), "TQ==");
  EXPECT_EQ(base64_encode("", 0), "");
  char out[3] = {};
  ASSERT_TRUE(base64_decode("TWE=", out, 2).is_ok());
  EXPECT_EQ(std::string(out, 2), "Ma");
  EXPECT_FALSE(base64_decode("TW!=", out, 2).is_ok());
  EXPECT_FALSE(base64_decode("TWE", out, 2).is_ok());
  EXPECT_FALSE(base64_decode("T=E=", out, 2).is_ok());
}

TEST(Constant, RoundTripsEveryDtype) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8, DataType::kUInt8,
                     DataType::kInt32, DataType::kInt64, DataType::kBool}) {
    Tensor t = *Tensor::empty(d, {2, 3});
    for (int64_t i = 0; i < 6; ++i) t.set(i, d == DataType::kBool ? (i % 2) : static_cast<double>(i * 3 - 7));
    auto a = constant_attrs_from(t);
    ASSERT_TRUE(a.is_ok());
    // Through JSON as an engine or graph file would store it.
    ConstantAttrs b;
    ASSERT_TRUE(b.from_json(a->to_json()).is_ok());
    EXPECT_TRUE(b.equals(*a));
    auto v = constant_value(b);
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    EXPECT_EQ(v->dtype(), d);
    EXPECT_EQ(v->dims(), (Dims{2, 3}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(v->at(i), t.at(i)) << dtype_name(d) << " element " << i;

    const OpSchema* s = OpRegistry::global().find("Constant");
    auto out = s->infer_outputs(InferContext(b, {}));
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ((*out)[0], (TensorDesc{d, {2, 3}, true}));
    OpCall call{s, &b, {}, *out};
    for (Backend be : {Backend::kRef, Backend::kCpu}) {
      std::vector<Tensor> dst{*Tensor::empty(d, {2, 3})};
      ASSERT_TRUE(op_test::run_engine(call, be, {}, dst).is_ok());
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(dst[0].at(i), t.at(i)) << backend_name(be);
    }
  }
}

TEST(Constant, RejectsMalformedAttributes) {
  const OpSchema* s = OpRegistry::global().find("Constant");
  Tensor t = *Tensor::empty(DataType::kInt32, {3});
  ConstantAttrs a = *constant_attrs_from(t);
  a.dims = {4};
  auto r = s->infer_outputs(InferContext(a, {}));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("needs 16 bytes"), std::string::npos) << r.status().message();
  a.dims = {-3};
  r = s->infer_outputs(InferContext(a, {}));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("negative"), std::string::npos) << r.status().message();
  a.dims = {3};
  a.data = "abc";
  EXPECT_FALSE(s->infer_outputs(InferContext(a, {})).is_ok());
  a.data = "!!!!!!!!!!!!!!!!";
  EXPECT_FALSE(constant_value(a).is_ok());
  a = *constant_attrs_from(t);
  a.dtype = static_cast<DataType>(200);
  r = s->infer_outputs(InferContext(a, {}));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("dtype"), std::string::npos);
}

}  // namespace
}  // namespace kiln
