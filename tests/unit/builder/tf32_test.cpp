// TF32: BuilderConfig's flag (on by default, as in TensorRT) reaches every kernel call the builder makes as
// OpCall::allow_tf32; which calls may get "+tf32" tactics; CUDA implementations refuse TF32 tactics on other dtypes
// (host code, no GPU needed) and, on a GPU, list them only when allowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "builder/builder.h"
#include "core/cuda_runtime.h"
#include "kernels/registry.h"
#include "kiln/builder.h"
#include "kiln/network.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

// A shape no other test uses: the spy below records only calls of this shape.
const Dims kSpyDims{3, 5, 7, 11};

// What the spy saw of the last Activation call of kSpyDims the CPU builder asked about.
std::optional<bool> seen_allow_tf32;

// A CPU Activation implementation that records `allow_tf32` and rejects every problem (so nothing else changes).
const bool kSpyRegistered = KernelRegistry::global().add(KernelImpl{
    .name = "cpu.test_tf32_spy",
    .op = "Activation",
    .backend = Backend::kCpu,
    .priority = 1000,
    .supports =
        [](const OpCall& call) {
          if (!call.inputs.empty() && call.inputs[0].dims == kSpyDims) seen_allow_tf32 = call.allow_tf32;
          return unsupported("a test spy: it accepts nothing");
        },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> { return internal_error("never created"); },
});

Network relu_network() {
  Network net;
  auto x = net.add_input("x", DataType::kFloat32, kSpyDims);
  EXPECT_TRUE(x.is_ok());
  auto relu = net.add_activation(*x, ActivationType::kRelu);
  EXPECT_TRUE(relu.is_ok());
  EXPECT_TRUE(net.mark_output((*relu)->output(0)).is_ok());
  return net;
}

TEST(Tf32, OnByDefaultInBuilderConfigAndClearable) {
  BuilderConfig config;
  EXPECT_TRUE(config.flag(BuilderFlag::kTf32));
  config.set_flag(BuilderFlag::kTf32, false);
  EXPECT_FALSE(config.flag(BuilderFlag::kTf32));
}

TEST(Tf32, TheBuilderPassesTheFlagToKernelCalls) {
  ASSERT_TRUE(kSpyRegistered);
  const Network net = relu_network();
  BuilderConfig config;
  seen_allow_tf32.reset();
  ASSERT_TRUE(Builder().build_serialized(net, config).is_ok());
  ASSERT_TRUE(seen_allow_tf32.has_value());
  EXPECT_TRUE(*seen_allow_tf32);

  config.set_flag(BuilderFlag::kTf32, false);
  seen_allow_tf32.reset();
  ASSERT_TRUE(Builder().build_serialized(net, config).is_ok());
  ASSERT_TRUE(seen_allow_tf32.has_value());
  EXPECT_FALSE(*seen_allow_tf32);

  BuildOptions options;  // the internal default: exact float32
  seen_allow_tf32.reset();
  ASSERT_TRUE(build_engine(net, options).is_ok());
  ASSERT_TRUE(seen_allow_tf32.has_value());
  EXPECT_FALSE(*seen_allow_tf32);
  options.passes.precision.tf32 = true;
  ASSERT_TRUE(build_engine(net, options).is_ok());
  EXPECT_TRUE(*seen_allow_tf32);
}

TEST(Tf32, TacticsAreAllowedForFloat32ProblemsOnly) {
  MatrixMultiplyAttrs attrs;
  OpCall call{OpRegistry::global().find("MatrixMultiply"),
              &attrs,
              {{DataType::kFloat32, {4, 8}, true}, {DataType::kFloat32, {8, 2}, true}},
              {{DataType::kFloat32, {4, 2}, true}}};
  EXPECT_FALSE(tf32_tactics_allowed(call));  // not allowed by the builder
  call.allow_tf32 = true;
  EXPECT_TRUE(tf32_tactics_allowed(call));
  call.outputs[0].dtype = DataType::kFloat16;
  EXPECT_FALSE(tf32_tactics_allowed(call));
  call.outputs[0].dtype = DataType::kFloat32;
  call.inputs[1].dtype = DataType::kBFloat16;
  EXPECT_FALSE(tf32_tactics_allowed(call));
  OpCall ints{OpRegistry::global().find("MatrixMultiply"),
              &attrs,
              {{DataType::kInt32, {4, 8}, true}},
              {{DataType::kInt32, {4, 2}, true}}};
  ints.allow_tf32 = true;
  EXPECT_FALSE(tf32_tactics_allowed(ints));  // no float32 tensor at all
}

TEST(Tf32, TacticSuffix) {
  EXPECT_TRUE(is_tf32_tactic("implicit_gemm+tf32"));
  EXPECT_TRUE(is_tf32_tactic("+tf32"));
  EXPECT_FALSE(is_tf32_tactic("implicit_gemm"));
  EXPECT_FALSE(is_tf32_tactic("tf32+fused"));
  EXPECT_EQ(strip_tf32_suffix("a1-t2+tf32"), "a1-t2");
  EXPECT_EQ(strip_tf32_suffix("a1-t2"), "a1-t2");
  EXPECT_EQ(strip_tf32_suffix("+tf32"), "");
}

const KernelImpl* cuda_impl(const char* name, const char* op) {
  for (const KernelImpl* k : KernelRegistry::global().find(op, Backend::kCuda))
    if (k->name == name) return k;
  return nullptr;
}

OpCall conv_call(DataType dt, const ConvolutionAttrs& attrs, std::string tactic) {
  OpCall call{OpRegistry::global().find("Convolution"),
              &attrs,
              {{dt, {1, 3, 8, 8}, true}, {dt, {4, 3, 3, 3}, true}},
              {{dt, {1, 4, 6, 6}, true}}};
  call.tactic = std::move(tactic);
  return call;
}

TEST(Tf32, CudaConvolutionTakesTf32TacticsForFloat32Only) {
  const KernelImpl* conv = cuda_impl("cuda.cudnn.convolution", "Convolution");
  if (!conv) GTEST_SKIP() << "built without CUDA";
  const ConvolutionAttrs attrs;
  EXPECT_TRUE(conv->create(conv_call(DataType::kFloat32, attrs, "implicit_precomp_gemm+tf32")).is_ok());
  EXPECT_TRUE(conv->create(conv_call(DataType::kFloat32, attrs, "+tf32")).is_ok());  // the TF32 heuristic's first
  auto half = conv->create(conv_call(DataType::kFloat16, attrs, "implicit_precomp_gemm+tf32"));
  ASSERT_FALSE(half.is_ok());
  EXPECT_NE(half.status().message().find("rounds float32 to TF32"), std::string::npos) << half.status().message();
  // TF32 comes last; float32 tensor-op tactics stay refused.
  EXPECT_FALSE(conv->create(conv_call(DataType::kFloat32, attrs, "implicit_precomp_gemm+tf32+tensor_op")).is_ok());
  EXPECT_FALSE(conv->create(conv_call(DataType::kFloat32, attrs, "implicit_precomp_gemm+tensor_op")).is_ok());
}

TEST(Tf32, CudaGemmsRefuseTf32TacticsOnOtherDtypes) {
  const KernelImpl* matmul = cuda_impl("cuda.cublaslt.matrix_multiply", "MatrixMultiply");
  if (!matmul) GTEST_SKIP() << "built without CUDA";
  MatrixMultiplyAttrs attrs;
  OpCall call{OpRegistry::global().find("MatrixMultiply"),
              &attrs,
              {{DataType::kFloat16, {4, 8}, true}, {DataType::kFloat16, {8, 2}, true}},
              {{DataType::kFloat16, {4, 2}, true}}};
  call.tactic = "a1-t2-s3-k1-r0-w0-c0-i0-l0+tf32";
  auto made = matmul->create(call);
  ASSERT_FALSE(made.is_ok());
  EXPECT_NE(made.status().message().find("TF32"), std::string::npos) << made.status().message();
}

// With a GPU: the tactic lists hold "+tf32" entries exactly when the call allows TF32.
TEST(Tf32, CudaTacticListsHoldTf32TacticsOnlyWhenAllowed) {
  if (!cuda::gpu_available()) GTEST_SKIP() << "no GPU to list cuDNN and cuBLASLt tactics on";
  const ConvolutionAttrs conv_attrs;
  MatrixMultiplyAttrs mm_attrs;
  OpCall mm{OpRegistry::global().find("MatrixMultiply"),
            &mm_attrs,
            {{DataType::kFloat32, {64, 64}, true}, {DataType::kFloat32, {64, 64}, true}},
            {{DataType::kFloat32, {64, 64}, true}}};
  const std::pair<const KernelImpl*, OpCall> cases[] = {
      {cuda_impl("cuda.cudnn.convolution", "Convolution"), conv_call(DataType::kFloat32, conv_attrs, "")},
      {cuda_impl("cuda.cublaslt.matrix_multiply", "MatrixMultiply"), mm},
  };
  for (const auto& c : cases) {
    const KernelImpl* impl = c.first;
    OpCall call = c.second;
    ASSERT_NE(impl, nullptr);
    auto count_tf32 = [&](bool allow) {
      call.allow_tf32 = allow;
      const std::vector<std::string> tactics = impl->tactics(call);
      return std::count_if(tactics.begin(), tactics.end(), [](const std::string& t) { return is_tf32_tactic(t); });
    };
    EXPECT_EQ(count_tf32(false), 0) << impl->name;
    EXPECT_GT(count_tf32(true), 0) << impl->name;
  }
}

}  // namespace
}  // namespace kiln
