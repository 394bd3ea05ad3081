#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/signal/signal.h"

namespace kiln {
namespace {

TensorDesc desc(DataType d, Dims dims) { return {d, dims, true}; }
constexpr DataType kF32 = DataType::kFloat32, kI64 = DataType::kInt64;

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in,
                                      std::vector<const Tensor*> values = {}) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in, values));
}

Tensor scalar(int64_t v) {
  Tensor t = *Tensor::empty(kI64, {});
  t.set(0, static_cast<double>(v));
  return t;
}

TEST(DftSchema, Shapes) {
  DftAttrs a;
  auto r = infer("DFT", a, {desc(kF32, {2, 10, 1})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{2, 10, 2}));
  a.onesided = true;
  r = infer("DFT", a, {desc(kF32, {2, 10, 1})});
  EXPECT_EQ((*r)[0].dims, (Dims{2, 6, 2}));
  const Tensor len = scalar(16);
  r = infer("DFT", a, {desc(kF32, {2, 10, 1}), desc(kI64, {})}, {nullptr, &len});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{2, 9, 2}));
  r = infer("DFT", a, {desc(kF32, {2, 10, 1}), desc(kI64, {})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{2, kDynamicDim, 2}));
}

TEST(DftSchema, Errors) {
  DftAttrs a;
  auto r = infer("DFT", a, {desc(kF32, {2, 10, 3})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("must end in 1 (real) or 2"), std::string::npos);
  a.axis = 2;
  r = infer("DFT", a, {desc(kF32, {2, 10, 1})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos);
  a.axis = 1;
  a.inverse = a.onesided = true;
  EXPECT_FALSE(infer("DFT", a, {desc(kF32, {2, 10, 2})}).is_ok());
}

TEST(StftSchema, ShapesAndErrors) {
  StftAttrs a;
  const Tensor step = scalar(8), len = scalar(16), bad = scalar(200);
  auto r = infer("STFT", a, {desc(kF32, {1, 128, 1}), desc(kI64, {}), desc(kF32, {16})}, {nullptr, &step, nullptr});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{1, 15, 9, 2}));
  r = infer("STFT", a, {desc(kF32, {1, 128, 1}), desc(kI64, {}), TensorDesc::absent(), desc(kI64, {})},
            {nullptr, &step, nullptr, &bad});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("longer than the signal"), std::string::npos);
  r = infer("STFT", a, {desc(kF32, {1, 128, 1}), desc(kI64, {}), desc(kF32, {12}), desc(kI64, {})},
            {nullptr, &step, nullptr, &len});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("must agree"), std::string::npos);
}

TEST(DftKernel, MatchesClosedForm) {
  // x[j] = cos(2 pi 3 j / n): the spectrum has n / 2 at bins 3 and n - 3, zero elsewhere.
  for (int64_t n : {16, 15}) {
    DftAttrs a;
    Tensor x = *Tensor::empty(kF32, {1, n, 1});
    for (int64_t j = 0; j < n; ++j) x.set(j, std::cos(2 * M_PI * 3 * j / n));
    OpCall call{OpRegistry::global().find("DFT"), &a, {desc(kF32, {1, n, 1})}, {desc(kF32, {1, n, 2})}};
    for (Backend b : {Backend::kRef, Backend::kCpu}) {
      std::vector<Tensor> dst{*Tensor::empty(kF32, {1, n, 2})};
      ASSERT_TRUE(op_test::run_engine(call, b, {x}, dst).is_ok());
      for (int64_t k = 0; k < n; ++k) {
        const double want = (k == 3 || k == n - 3) ? n / 2.0 : 0.0;
        EXPECT_NEAR(dst[0].at(2 * k), want, 1e-4) << backend_name(b) << " n=" << n << " k=" << k;
        EXPECT_NEAR(dst[0].at(2 * k + 1), 0.0, 1e-4);
      }
    }
  }
}

TEST(MelWeightMatrixSchema, Shape) {
  MelWeightMatrixAttrs a;
  const Tensor bins = scalar(8), len = scalar(16), rate = scalar(8192);
  Tensor lo = *Tensor::empty(kF32, {}), hi = *Tensor::empty(kF32, {});
  lo.set(0, 0);
  hi.set(0, 4096);
  std::vector<TensorDesc> in = {desc(kI64, {}), desc(kI64, {}), desc(kI64, {}), desc(kF32, {}), desc(kF32, {})};
  auto r = infer("MelWeightMatrix", a, in, {&bins, &len, &rate, &lo, &hi});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{9, 8}));
  hi.set(0, 5000);
  r = infer("MelWeightMatrix", a, in, {&bins, &len, &rate, &lo, &hi});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("sample_rate / 2"), std::string::npos);
}

}  // namespace
}  // namespace kiln
