#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/quantization/quantization.h"

namespace kiln {
namespace {

TensorDesc desc(DataType d, Dims dims) { return {d, dims, true}; }
constexpr DataType kF32 = DataType::kFloat32, kU8 = DataType::kUInt8, kI8 = DataType::kInt8, kI32 = DataType::kInt32;

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in));
}

std::string error_of(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  auto r = infer(op, a, std::move(in));
  EXPECT_FALSE(r.is_ok());
  return r ? "" : r.status().message();
}

TEST(QuantizeSchema, OutputTypes) {
  QuantizeAttrs a;
  auto r = infer("Quantize", a, {desc(kF32, {2, 3}), desc(kF32, {}), desc(kI8, {})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dtype, kI8);
  r = infer("Quantize", a, {desc(kF32, {2, 3}), desc(kF32, {3})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dtype, kU8);
  r = infer("Dequantize", a, {desc(kI8, {2, 3}), desc(kF32, {3}), desc(kI8, {3})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dtype, kF32);
}

TEST(QuantizeSchema, Errors) {
  QuantizeAttrs a;
  EXPECT_NE(error_of("Quantize", a, {desc(kF32, {2, 3}), desc(kF32, {4})}).find("one value per index of axis 1"),
            std::string::npos);
  EXPECT_NE(error_of("Quantize", a, {desc(kF32, {2, 3}), desc(kF32, {3}), desc(kI8, {})}).find("shape of scale"),
            std::string::npos);
  EXPECT_NE(error_of("Quantize", a, {desc(kF32, {2}), desc(kF32, {}), desc(kI32, {})}).find("int8 or uint8"),
            std::string::npos);
  EXPECT_NE(error_of("Dequantize", a, {desc(kF32, {2}), desc(kF32, {})}).find("int8, uint8 or int32"),
            std::string::npos);
  a.axis = 5;
  EXPECT_NE(error_of("Quantize", a, {desc(kF32, {2, 3}), desc(kF32, {3})}).find("out of range"), std::string::npos);
}

TEST(IntegerMatmulSchema, ShapesAndErrors) {
  NoAttrs a;
  auto r = infer("MatrixMultiplyInteger", a, {desc(kU8, {2, 4, 3}), desc(kI8, {3, 5}), desc(kU8, {4}), desc(kI8, {5})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{2, 4, 5}));
  EXPECT_EQ((*r)[0].dtype, kI32);
  EXPECT_NE(
      error_of("MatrixMultiplyInteger", a, {desc(kU8, {4, 3}), desc(kU8, {3, 5}), desc(kU8, {3})}).find("per row"),
      std::string::npos);
  EXPECT_NE(error_of("MatrixMultiplyInteger", a, {desc(kF32, {4, 3}), desc(kU8, {3, 5})}).find("int8 or uint8"),
            std::string::npos);
  EXPECT_NE(error_of("MatrixMultiplyInteger", a, {desc(kU8, {4, 3}), desc(kU8, {4, 5})}).find("K = 3"),
            std::string::npos);
  r = infer("QuantizedMatrixMultiply", a,
            {desc(kU8, {4, 3}), desc(kF32, {}), desc(kU8, {}), desc(kU8, {3, 5}), desc(kF32, {5}), desc(kU8, {5}),
             desc(kF32, {}), desc(kI8, {})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dtype, kI8);
}

TEST(IntegerConvSchema, ShapesAndErrors) {
  ConvolutionAttrs a;
  a.pads = {1, 1, 1, 1};
  auto r =
      infer("ConvolutionInteger", a, {desc(kU8, {1, 2, 5, 5}), desc(kU8, {4, 2, 3, 3}), desc(kU8, {}), desc(kU8, {4})});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims, (Dims{1, 4, 5, 5}));
  EXPECT_NE(error_of("ConvolutionInteger", a,
                     {desc(kU8, {1, 2, 5, 5}), desc(kU8, {4, 2, 3, 3}), desc(kU8, {}), desc(kU8, {3})})
                .find("per output channel"),
            std::string::npos);
  EXPECT_NE(error_of("QuantizedConvolution", a,
                     {desc(kU8, {1, 2, 5, 5}), desc(kF32, {}), desc(kU8, {}), desc(kU8, {4, 2, 3, 3}), desc(kF32, {}),
                      desc(kU8, {}), desc(kF32, {}), desc(kU8, {}), desc(kF32, {4})})
                .find("bias b must be int32"),
            std::string::npos);
}

TEST(QuantizeKernel, RoundsHalfToEvenAndSaturates) {
  QuantizeAttrs a;
  a.axis = 0;
  Tensor x = *Tensor::empty(kF32, {6});
  const float xs[] = {0.5f, 1.5f, 2.5f, -2.5f, 1000.f, -1000.f};
  for (int i = 0; i < 6; ++i) x.set(i, xs[i]);
  Tensor s = *Tensor::empty(kF32, {}), z = *Tensor::zeros(kI8, {});
  s.set(0, 1.0);
  OpCall call{
      OpRegistry::global().find("Quantize"), &a, {desc(kF32, {6}), desc(kF32, {}), desc(kI8, {})}, {desc(kI8, {6})}};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    std::vector<Tensor> dst{*Tensor::empty(kI8, {6})};
    ASSERT_TRUE(op_test::run_engine(call, b, {x, s, z}, dst).is_ok());
    const double want[] = {0, 2, 2, -2, 127, -128};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(dst[0].at(i), want[i]) << backend_name(b) << " element " << i;
  }
}

}  // namespace
}  // namespace kiln
