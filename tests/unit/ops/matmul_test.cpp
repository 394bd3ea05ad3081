#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/activation/activation.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in));
}

Dims out_dims(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  auto r = infer(op, a, std::move(in));
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? (*r)[0].dims : Dims{-2};
}

std::string error_of(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  auto r = infer(op, a, std::move(in));
  EXPECT_FALSE(r.is_ok());
  return r.status().message();
}

TEST(MatrixMultiplySchema, NumpyShapes) {
  MatrixMultiplyAttrs a;
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({2, 3}), f32({3, 4})}), (Dims{2, 4}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({5}), f32({5})}), (Dims{}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({4}), f32({2, 4, 3})}), (Dims{2, 3}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({2, 3, 4}), f32({4})}), (Dims{2, 3}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({2, 1, 3, 4}), f32({5, 4, 6})}), (Dims{2, 5, 3, 6}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({3, 0}), f32({0, 4})}), (Dims{3, 4}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({kDynamicDim, 3}), f32({3, 4})}), (Dims{kDynamicDim, 4}));
}

TEST(MatrixMultiplySchema, TransposesAndGemm) {
  MatrixMultiplyAttrs a;
  a.transpose_a = true;
  a.transpose_b = true;
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({4, 3}), f32({5, 4})}), (Dims{3, 5}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({4, 3}), f32({5, 4}), f32({5})}), (Dims{3, 5}));
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({4, 3}), f32({5, 4}), f32({3, 1})}), (Dims{3, 5}));
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({4, 3}), f32({5, 4}), f32({3, 6})}).find("'c' of shape [3, 6]"),
            std::string::npos);
  // c may not grow the output.
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({4, 3}), f32({5, 4}), f32({2, 3, 5})}).find("output shape [3, 5]"),
            std::string::npos);
}

TEST(MatrixMultiplySchema, Errors) {
  MatrixMultiplyAttrs a;
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({2, 3}), f32({4, 5})}).find("K = 3"), std::string::npos);
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({}), f32({4, 5})}).find("'a' must have rank >= 1"), std::string::npos);
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({2, 2, 3}), f32({3, 3, 5})}).find("batch dims"), std::string::npos);
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({2, 3}), {DataType::kFloat16, {3, 5}, true}}).find("same type"),
            std::string::npos);
  EXPECT_NE(
      error_of("MatrixMultiply", a, {{DataType::kBool, {2, 3}, true}, {DataType::kBool, {3, 5}, true}}).find("bool"),
      std::string::npos);
  EXPECT_FALSE(infer("MatrixMultiply", a, {f32({2, 3})}).is_ok());
}

TEST(FullyConnectedSchema, ShapesAndErrors) {
  FullyConnectedAttrs a;
  EXPECT_EQ(out_dims("FullyConnected", a, {f32({4, 6}), f32({5, 6}), f32({5})}), (Dims{4, 5}));
  EXPECT_EQ(out_dims("FullyConnected", a, {f32({2, 3, 4, 4}), f32({7, 48})}), (Dims{2, 7}));
  a.axis = 2;
  EXPECT_EQ(out_dims("FullyConnected", a, {f32({2, 3, 4, 5}), f32({6, 20})}), (Dims{2, 3, 6}));
  a.axis = -1;
  EXPECT_EQ(out_dims("FullyConnected", a, {f32({2, 3, 8}), f32({4, 8})}), (Dims{2, 3, 4}));
  a.axis = 1;
  EXPECT_NE(error_of("FullyConnected", a, {f32({2, 3, 4}), f32({7, 11})}).find("K = 12"), std::string::npos);
  EXPECT_NE(error_of("FullyConnected", a, {f32({2, 6}), f32({7, 6}), f32({6})}).find("'bias' must have shape [7]"),
            std::string::npos);
  EXPECT_NE(error_of("FullyConnected", a, {f32({2, 6}), f32({42})}).find("rank 2"), std::string::npos);
  a.axis = 4;
  EXPECT_NE(error_of("FullyConnected", a, {f32({2, 6}), f32({7, 6})}).find("axis 4 is out of range"),
            std::string::npos);
}

TEST(MatrixMultiplyKernels, CpuAgreesWithHandComputedGemm) {
  MatrixMultiplyAttrs a;
  a.transpose_b = true;
  a.alpha = 2.f;
  a.beta = -1.f;
  OpCall call{OpRegistry::global().find("MatrixMultiply"), &a, {f32({1, 2}), f32({2, 2}), f32({2})}, {f32({1, 2})}};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto x = *Tensor::empty(DataType::kFloat32, {1, 2});
    auto w = *Tensor::empty(DataType::kFloat32, {2, 2});
    auto c = *Tensor::empty(DataType::kFloat32, {2});
    const double xs[] = {1, 2}, ws[] = {3, 4, 5, 6}, cs[] = {10, 20};
    for (int i = 0; i < 2; ++i) x.set(i, xs[i]), c.set(i, cs[i]);
    for (int i = 0; i < 4; ++i) w.set(i, ws[i]);
    std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, {1, 2})};
    ASSERT_TRUE(op_test::run_engine(call, b, {x, w, c}, dst).is_ok());
    // [1, 2] @ [[3, 4], [5, 6]]^T = [11, 17]; 2 * that - c = [12, 14].
    EXPECT_EQ(dst[0].at(0), 12.0) << backend_name(b);
    EXPECT_EQ(dst[0].at(1), 14.0) << backend_name(b);
  }
}

// The optimizer's epilogue: a residual of the output's shape, and floating fused activations other than PRelu.
TEST(MatrixMultiplySchema, EpilogueChecks) {
  MatrixMultiplyAttrs a;
  const TensorDesc absent = TensorDesc::absent();
  EXPECT_EQ(out_dims("MatrixMultiply", a, {f32({2, 3}), f32({3, 4}), absent, f32({2, 4})}), (Dims{2, 4}));
  EXPECT_NE(error_of("MatrixMultiply", a, {f32({2, 3}), f32({3, 4}), absent, f32({1, 4})})
                .find("'residual' of shape [1, 4] must have the output's shape [2, 4]"),
            std::string::npos);
  FullyConnectedAttrs f;
  EXPECT_NE(error_of("FullyConnected", f, {f32({2, 3}), f32({4, 3}), absent, {DataType::kFloat16, {2, 4}, true}})
                .find("'residual' has type float16"),
            std::string::npos);
  a.fused = {true, ActivationKind::kRelu};
  const TensorDesc i32 = {DataType::kInt32, {2, 2}, true};
  EXPECT_NE(error_of("MatrixMultiply", a, {i32, i32}).find("fused activations need a floating type"),
            std::string::npos);
  f.fused = {true, ActivationKind::kPRelu};
  EXPECT_NE(error_of("FullyConnected", f, {f32({2, 3}), f32({4, 3})}).find("cannot fuse PRelu"), std::string::npos);
}

// BERT's [128, 1, 768] x [768, 2304] with bias, residual and GELU: still one GEMM of 128 rows, not 128 products of
// one row each.
TEST(MatrixMultiplyKernels, EpilogueKeepsABatchAgainstOneMatrixAsOneGemm) {
  MatrixMultiplyAttrs a;
  a.fused = {true, ActivationKind::kGelu};
  const Dims ad{128, 1, 768}, bd{768, 2304}, cd{2304}, yd{128, 1, 2304};
  OpCall call{OpRegistry::global().find("MatrixMultiply"), &a, {f32(ad), f32(bd), f32(cd), f32(yd)}, {f32(yd)}};
  std::vector<Tensor> src;
  for (const Dims& d : {ad, bd, cd, yd}) {
    Tensor t = *Tensor::empty(DataType::kFloat32, d);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::sin(0.37 * static_cast<double>(i % 1009)));
    src.push_back(t);
  }
  std::vector<Tensor> dst{*Tensor::empty(DataType::kFloat32, yd)};
  auto impl = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_TRUE(impl.is_ok()) << impl.status().message();
  EXPECT_EQ((*impl)->name, "cpu.onednn.matrix_multiply");
  auto kernel = (*impl)->create(call);
  ASSERT_TRUE(kernel.is_ok());
  KernelContext ctx{call, src, dst, cpu_stream(), cpu_allocator()};
  ASSERT_TRUE((*kernel)->run(ctx).is_ok());
  EXPECT_NE((*kernel)->detail().find("batch folded into rows"), std::string::npos) << (*kernel)->detail();
  for (int64_t row : {0, 77, 127})
    for (int64_t col : {0, 1000, 2303}) {
      double dot = src[2].at(col) + src[3].at(row * 2304 + col);
      for (int64_t k = 0; k < 768; ++k) dot += src[0].at(row * 768 + k) * src[1].at(k * 2304 + col);
      const double gelu = 0.5 * dot * (1 + std::erf(dot / std::sqrt(2.0)));
      EXPECT_NEAR(dst[0].at(row * 2304 + col), gelu, 1e-3 * (1 + std::abs(gelu))) << row << ", " << col;
    }
}

// cpu.packed_matrix_multiply with B given at run time (packed on every run: new weights in the same buffer on the
// second run are followed) and with B prepared at build time (the engine's copy is used, not the constant's later
// contents); 300-long K (three K blocks), 40 columns (a partial panel), 13 rows (a partial tile), a bias and GELU.
TEST(MatrixMultiply, PackedFollowsRunTimeWeightsAndUsesPreparedOnes) {
  const KernelImpl* impl = nullptr;
  for (const KernelImpl* k : KernelRegistry::global().find("MatrixMultiply", Backend::kCpu))
    if (k->name == "cpu.packed_matrix_multiply") impl = k;
  ASSERT_NE(impl, nullptr);
  MatrixMultiplyAttrs a;
  a.fused = FusedActivation::from(activation_defaults(ActivationKind::kGelu));
  const Dims ad{13, 300}, bd{300, 40}, yd{13, 40};
  auto fill = [](Tensor& t, int seed) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>((i * 37 + seed) % 23) / 46.f - 0.25f;
  };
  Tensor x = *Tensor::empty(DataType::kFloat32, ad), w = *Tensor::empty(DataType::kFloat32, bd);
  Tensor c = *Tensor::empty(DataType::kFloat32, {40});
  fill(x, 1), fill(c, 3);
  const OpSchema* s = OpRegistry::global().find("MatrixMultiply");
  for (const bool prepared_weights : {false, true}) {
    SCOPED_TRACE(prepared_weights ? "prepared" : "run time");
    fill(w, 2);
    OpCall call{s, &a, {f32(ad), f32(bd), f32({40})}, {f32(yd)}, {nullptr, prepared_weights ? &w : nullptr}};
    const Status ok = impl->supports(call);
    if (!ok.is_ok()) GTEST_SKIP() << ok.message();  // a CPU without AVX2 and FMA
    Tensor prepared;
    if (prepared_weights) {
      auto p = impl->prepare(call);
      ASSERT_TRUE(p.is_ok()) << p.status().message();
      prepared = std::move(*p);
      call.prepared = &prepared;
      fill(w, 7);  // the kernel must use the prepared copy, not the constant's contents when it is made
    }
    auto kernel = impl->create(call);
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    for (int run = 0; run < 2; ++run) {
      fill(w, prepared_weights ? 9 + run : 2 + 5 * run);  // new contents in the same buffer
      Tensor used = *w.clone();
      if (prepared_weights) fill(used, 2);  // what was prepared
      std::vector<Tensor> want{*Tensor::empty(DataType::kFloat32, yd)};
      OpCall reference = call;
      reference.constants.clear();
      reference.prepared = nullptr;
      ASSERT_TRUE(op_test::run_engine(reference, Backend::kRef, {x, used, c}, want).is_ok());
      Tensor y = *Tensor::empty(DataType::kFloat32, yd);
      KernelContext ctx{call, {x, w, c}, {y}, cpu_stream(), cpu_allocator()};
      ASSERT_TRUE((*kernel)->run(ctx).is_ok());
      for (int64_t i = 0; i < y.numel(); ++i)
        ASSERT_NEAR(y.data<float>()[i], want[0].data<float>()[i], 1e-4) << "at " << i << ", run " << run;
    }
  }
}

}  // namespace
}  // namespace kiln
