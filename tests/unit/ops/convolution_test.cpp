#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

using V = std::vector<int64_t>;

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in));
}

Dims conv_dims(const ConvolutionAttrs& a, Dims x, Dims w) {
  auto r = infer("Convolution", a, {f32(x), f32(w)});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? (*r)[0].dims : Dims{};
}

Dims deconv_dims(const DeconvolutionAttrs& a, Dims x, Dims w) {
  auto r = infer("Deconvolution", a, {f32(x), f32(w)});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? (*r)[0].dims : Dims{};
}

// The message of a failed Convolution inference; empty when it unexpectedly succeeds.
std::string conv_error(const ConvolutionAttrs& a, Dims x, Dims w, std::optional<Dims> b = std::nullopt,
                       DataType dt = DataType::kFloat32) {
  std::vector<TensorDesc> in{{dt, x, true}, {dt, w, true}};
  if (b) in.push_back({dt, *b, true});
  auto r = infer("Convolution", a, in);
  return r.is_ok() ? "" : r.status().message();
}

std::string deconv_error(const DeconvolutionAttrs& a, Dims x, Dims w) {
  auto r = infer("Deconvolution", a, {f32(x), f32(w)});
  return r.is_ok() ? "" : r.status().message();
}

// Runs `call`'s op on every registered ref and CPU implementation that accepts it (each a pinned one-node engine).
void run_everywhere(const OpCall& call, const std::vector<Tensor>& src, const std::vector<double>& want) {
  int ran = 0;
  for (const auto& [name, result] : op_test::run_all(call.schema->name.c_str(), *call.attrs, src)) {
    ASSERT_TRUE(result.is_ok()) << name << ": " << result.status().to_string();
    ++ran;
    const Tensor& y = result->front();
    ASSERT_EQ(y.dims(), call.outputs[0].dims) << name;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.at(static_cast<int64_t>(i)), want[i]) << name << " at " << i;
  }
  EXPECT_GE(ran, 3);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

TEST(Convolution, InfersOutputDims) {
  ConvolutionAttrs a;
  EXPECT_EQ(conv_dims(a, {2, 3, 10}, {4, 3, 3}), (Dims{2, 4, 8}));
  a.pads = {1, 1, 1, 1};
  EXPECT_EQ(conv_dims(a, {1, 3, 8, 8}, {5, 3, 3, 3}), (Dims{1, 5, 8, 8}));
  a.strides = {2, 2};
  EXPECT_EQ(conv_dims(a, {1, 3, 9, 8}, {5, 3, 3, 3}), (Dims{1, 5, 5, 4}));
  a = {};
  a.dilations = {2, 1, 3};
  EXPECT_EQ(conv_dims(a, {1, 2, 9, 9, 9}, {4, 2, 3, 3, 3}), (Dims{1, 4, 5, 7, 3}));
  a = {};
  a.group = 4;
  EXPECT_EQ(conv_dims(a, {1, 4, 6, 6}, {8, 1, 3, 3}), (Dims{1, 8, 4, 4}));
  a = {};
  a.pads = {0, 2, 1, 0};  // asymmetric
  EXPECT_EQ(conv_dims(a, {1, 1, 5, 5}, {1, 1, 3, 3}), (Dims{1, 1, 4, 5}));
}

// Channel blocks (the layout-blocked pass): x [N, C/8, H, W, 8] or NCHW with plain_input, y [N, M/8, Ho, Wo, 8];
// malformed layouts are refused naming the attribute.
TEST(Convolution, InfersAndChecksChannelBlocks) {
  ConvolutionAttrs a;
  a.channel_block = 8;
  a.pads = {1, 1, 1, 1};
  a.strides = {2, 2};
  EXPECT_EQ(conv_dims(a, {2, 2, 9, 8, 8}, {24, 16, 3, 3}), (Dims{2, 3, 5, 4, 8}));
  a.plain_input = true;
  EXPECT_EQ(conv_dims(a, {2, 3, 9, 8}, {16, 3, 3, 3}), (Dims{2, 2, 5, 4, 8}));
  EXPECT_TRUE(contains(conv_error(a, {2, 2, 9, 8, 8}, {16, 16, 3, 3}), "[N, C, H, W]"));
  a.plain_input = false;
  EXPECT_TRUE(contains(conv_error(a, {2, 16, 9, 8}, {16, 16, 3, 3}), "is 2-D only"));
  EXPECT_TRUE(contains(conv_error(a, {2, 1, 9, 8, 16}, {16, 16, 3, 3}), "blocks of 16 channels; channel_block is 8"));
  EXPECT_TRUE(contains(conv_error(a, {2, 2, 9, 8, 8}, {12, 16, 3, 3}), "not a multiple of channel_block 8"));
  EXPECT_TRUE(contains(conv_error(a, {2, 2, 9, 8, 8}, {16, 8, 3, 3}), "has 16 channels"));
  a.channels_last = true;
  EXPECT_TRUE(contains(conv_error(a, {2, 2, 9, 8, 8}, {16, 16, 3, 3}), "both channels_last and channel_block"));
  a.channels_last = false;
  a.channel_block = 100;
  EXPECT_TRUE(contains(conv_error(a, {2, 2, 9, 8, 8}, {16, 16, 3, 3}), "must be 0 to 64"));
  a.channel_block = 0;
  a.plain_input = true;
  EXPECT_TRUE(contains(conv_error(a, {2, 16, 9, 8}, {16, 16, 3, 3}), "plain_input is set without channel_block"));
}

TEST(Convolution, AutoPadResolvesPads) {
  ConvolutionAttrs a;
  a.auto_pad = AutoPad::kSameUpper;
  a.strides = {2};
  auto w = convolution_window(a, {1, 1, 7}, {1, 1, 4});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->output, V{4});
  // total pad (4 - 1) * 2 + 4 - 7 = 3: the odd one goes to the end for same_upper.
  EXPECT_EQ(w->pads_begin, V{1});
  EXPECT_EQ(w->pads_end, V{2});
  a.auto_pad = AutoPad::kSameLower;
  w = convolution_window(a, {1, 1, 7}, {1, 1, 4});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->pads_begin, V{2});
  EXPECT_EQ(w->pads_end, V{1});
  a.auto_pad = AutoPad::kValid;
  a.strides = {3};
  EXPECT_EQ(conv_dims(a, {1, 1, 10}, {1, 1, 3}), (Dims{1, 1, 3}));
}

TEST(Convolution, WindowHelperCeilModeAndDynamicDims) {
  // Pooling-style: input 6, kernel 3, stride 2 gives 2 with floor and 3 with ceil.
  auto floor = conv_window("MaxPool", {6}, {3}, {2}, {}, {}, AutoPad::kNotSet, false);
  auto ceil = conv_window("MaxPool", {6}, {3}, {2}, {}, {}, AutoPad::kNotSet, true);
  ASSERT_TRUE(floor.is_ok() && ceil.is_ok());
  EXPECT_EQ(floor->output, V{2});
  EXPECT_EQ(ceil->output, V{3});
  // The last ceil window would start in the end padding only: dropped.
  auto dropped = conv_window("MaxPool", {5}, {2}, {2}, {}, {0, 2}, AutoPad::kNotSet, true);
  ASSERT_TRUE(dropped.is_ok());
  EXPECT_EQ(dropped->output, V{3});
  ConvolutionAttrs a;
  EXPECT_EQ(conv_dims(a, {kDynamicDim, 3, kDynamicDim, 8}, {2, 3, 3, 3}), (Dims{kDynamicDim, 2, kDynamicDim, 6}));
}

TEST(Convolution, RejectsMalformedInput) {
  ConvolutionAttrs a;
  EXPECT_TRUE(contains(conv_error(a, {1, 4, 5, 5}, {2, 3, 3, 3}), "has 4 channels"));
  a.group = 2;
  EXPECT_TRUE(contains(conv_error(a, {1, 4, 5, 5}, {3, 2, 3, 3}), "not divisible by group=2"));
  a = {};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 2, 5}, {2, 2, 3, 3}), "larger than the padded input"));
  a.strides = {0, 1};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "strides [0, 1]"));
  a = {};
  a.dilations = {1, -2};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "must be positive"));
  a = {};
  a.pads = {1, 1};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "expected 4"));
  a.pads = {1, 1, 1, -1};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "non-negative"));
  a.pads = {1, 1, 1, 1};
  a.auto_pad = AutoPad::kSameUpper;
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "cannot be combined with auto_pad"));
  a = {};
  a.group = 0;
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "group"));
  a = {};
  EXPECT_TRUE(contains(conv_error(a, {2, 5}, {2, 2}), "rank 3 or more"));
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {2, 2, 3}), "must have the rank of x"));
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {3, 2, 3, 3}, Dims{2}), "input b of shape [2]"));
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {3, 2, 3, 3}, std::nullopt, DataType::kInt32), "floating"));
  a.kernel_shape = {3, 2};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {3, 2, 3, 3}), "kernel_shape [3, 2] does not match"));
  a.kernel_shape = {};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, kDynamicDim, 5}, {3, 2, kDynamicDim, 3}), "dynamic spatial dims"));
  a.strides = {int64_t{1} << 40, 1};
  EXPECT_TRUE(contains(conv_error(a, {1, 2, 5, 5}, {3, 2, 3, 3}), "reasonably small"));
}

TEST(Deconvolution, InfersOutputDims) {
  DeconvolutionAttrs a;
  a.strides = {2};
  EXPECT_EQ(deconv_dims(a, {1, 3, 5}, {3, 2, 3}), (Dims{1, 2, 11}));
  a.strides = {2, 2};
  a.pads = {1, 1, 1, 1};
  a.output_padding = {1, 0};
  EXPECT_EQ(deconv_dims(a, {1, 4, 4, 4}, {4, 3, 3, 3}), (Dims{1, 3, 8, 7}));
  a = {};
  a.group = 2;
  EXPECT_EQ(deconv_dims(a, {1, 4, 5, 5}, {4, 3, 3, 3}), (Dims{1, 6, 7, 7}));
  a = {};
  a.strides = {2, 2};
  a.auto_pad = AutoPad::kSameUpper;
  EXPECT_EQ(deconv_dims(a, {1, 2, 4, 5}, {2, 2, 3, 3}), (Dims{1, 2, 8, 10}));
}

TEST(Deconvolution, OutputShapeSetsPads) {
  DeconvolutionAttrs a;
  a.strides = {2};
  a.output_shape = {8};
  // Full output 2 * 3 + 3 = 9, so the total pad is 1: at the beginning unless same_upper.
  auto w = deconvolution_window(a, {1, 2, 4}, {2, 3, 3});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->output, V{8});
  EXPECT_EQ(w->pads_begin, V{1});
  EXPECT_EQ(w->pads_end, V{0});
  a.auto_pad = AutoPad::kSameUpper;
  w = deconvolution_window(a, {1, 2, 4}, {2, 3, 3});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->pads_begin, V{0});
  EXPECT_EQ(w->pads_end, V{1});
  a.output_shape = {1, 3, 7};  // the full shape is accepted too
  EXPECT_EQ(deconv_dims(a, {1, 2, 4}, {2, 3, 3}), (Dims{1, 3, 7}));
}

TEST(Deconvolution, RejectsMalformedInput) {
  DeconvolutionAttrs a;
  EXPECT_TRUE(contains(deconv_error(a, {1, 4, 5, 5}, {3, 2, 3, 3}), "has 4 channels"));
  a.group = 2;
  EXPECT_TRUE(contains(deconv_error(a, {1, 3, 5, 5}, {3, 2, 3, 3}), "not divisible by group=2"));
  a = {};
  a.strides = {2, 2};
  a.output_padding = {2, 0};
  EXPECT_TRUE(contains(deconv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "output_padding [2, 0]"));
  a = {};
  a.output_shape = {1, 2, 3};
  EXPECT_TRUE(contains(deconv_error(a, {1, 2, 5, 5}, {2, 2, 3, 3}), "output_shape [1, 2, 3] has 3 entries"));
  a = {};
  a.pads = {3, 3, 0, 0};
  EXPECT_TRUE(contains(deconv_error(a, {1, 2, 1, 1}, {2, 2, 2, 2}), "larger than the full output"));
}

// Hand-computed results; every ref and CPU implementation must reproduce them.
TEST(Convolution, KnownValuesOnEveryImplementation) {
  ConvolutionAttrs a;
  a.pads = {1, 1};
  const OpSchema* s = OpRegistry::global().find("Convolution");
  OpCall call{s, &a, {f32({1, 1, 4}), f32({1, 1, 3})}, {f32({1, 1, 4})}};
  auto x = *Tensor::empty(DataType::kFloat32, {1, 1, 4});
  auto w = *Tensor::empty(DataType::kFloat32, {1, 1, 3});
  for (int i = 0; i < 4; ++i) x.set(i, i + 1);
  const double wv[] = {1, 0, -1};
  for (int i = 0; i < 3; ++i) w.set(i, wv[i]);
  run_everywhere(call, {x, w}, {-2, -2, -2, 3});
}

TEST(Deconvolution, KnownValuesOnEveryImplementation) {
  DeconvolutionAttrs a;
  a.strides = {2};
  const OpSchema* s = OpRegistry::global().find("Deconvolution");
  OpCall call{s, &a, {f32({1, 1, 2}), f32({1, 1, 3}), f32({1})}, {f32({1, 1, 5})}};
  auto x = *Tensor::empty(DataType::kFloat32, {1, 1, 2});
  auto w = *Tensor::empty(DataType::kFloat32, {1, 1, 3});
  auto bias = *Tensor::empty(DataType::kFloat32, {1});
  x.set(0, 1);
  x.set(1, 2);
  for (int i = 0; i < 3; ++i) w.set(i, i + 1);
  bias.set(0, 0.5);
  // x0 * w at 0..2, x1 * w at 2..4, plus the bias.
  run_everywhere(call, {x, w, bias}, {1.5, 2.5, 3 + 2 + 0.5, 4.5, 6.5});
}

TEST(Convolution, CpuKernelsRegisteredInPriorityOrder) {
  for (const char* op : {"Convolution", "Deconvolution"}) {
    auto cpu = KernelRegistry::global().find(op, Backend::kCpu);
    ASSERT_GE(cpu.size(), 2u) << op;  // oneDNN first; own loops (and the NHWC direct kernels) after it
    EXPECT_NE(cpu[0]->name.find("onednn"), std::string::npos);
    for (size_t i = 1; i < cpu.size(); ++i) EXPECT_GT(cpu[0]->priority, cpu[i]->priority) << cpu[i]->name;
  }
  // oneDNN cannot take negative pads (output_shape beyond the full output): the own loops do.
  DeconvolutionAttrs a;
  a.strides = {2};
  a.output_shape = {10};
  OpCall call{OpRegistry::global().find("Deconvolution"), &a, {f32({1, 1, 3}), f32({1, 1, 3})}, {f32({1, 1, 10})}};
  auto chosen = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_TRUE(chosen.is_ok());
  EXPECT_EQ((*chosen)->name, "cpu.deconvolution");
  // With a dynamic input size oneDNN is chosen, and falls back to the loops once it sees the shape.
  OpCall dynamic = call;
  dynamic.inputs[0].dims = {1, 1, kDynamicDim};
  chosen = KernelRegistry::global().select(dynamic, Backend::kCpu);
  ASSERT_TRUE(chosen.is_ok());
  EXPECT_EQ((*chosen)->name, "cpu.onednn.deconvolution");
  auto x = *Tensor::empty(DataType::kFloat32, {1, 1, 3});
  auto w = *Tensor::empty(DataType::kFloat32, {1, 1, 3});
  for (int i = 0; i < 3; ++i) {
    x.set(i, i + 1);
    w.set(i, 1);
  }
  std::vector<Tensor> got{*Tensor::empty(DataType::kFloat32, {1, 1, 10})};
  ASSERT_TRUE(run_once(dynamic, Backend::kCpu, {x, w}, got).is_ok());
  // Full output [1, 1, 3, 2, 5, 3, 3] (x0 at 0..2, x1 at 2..4, x2 at 4..6) shifted by the begin pad -1.
  const double want[] = {0, 1, 1, 3, 2, 5, 3, 3, 0, 0};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[0].at(i), want[i]) << "at " << i;
}

TEST(Convolution, ResidualMustMatchTheOutput) {
  ConvolutionAttrs a;
  a.pads = {1, 1, 1, 1};
  const Dims x{1, 3, 6, 6}, w{4, 3, 3, 3};
  auto ok = infer("Convolution", a, {f32(x), f32(w), f32({4}), f32({1, 4, 6, 6})});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ((*ok)[0].dims, (Dims{1, 4, 6, 6}));
  auto bad = infer("Convolution", a, {f32(x), f32(w), f32({4}), f32({1, 4, 1, 1})});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("residual of shape [1, 4, 1, 1]"), std::string::npos) << bad.status().message();
  auto dtype = infer("Convolution", a, {f32(x), f32(w), f32({4}), {DataType::kFloat16, Dims{1, 4, 6, 6}, true}});
  ASSERT_FALSE(dtype.is_ok());
  EXPECT_NE(dtype.status().message().find("residual has dtype float16"), std::string::npos) << dtype.status().message();
  a.fused = {true, ActivationKind::kPRelu, 0.f, 0.f};
  auto prelu = infer("Convolution", a, {f32(x), f32(w)});
  ASSERT_FALSE(prelu.is_ok());
  EXPECT_NE(prelu.status().message().find("fused_kind is prelu"), std::string::npos) << prelu.status().message();
}

// The epilogue (residual + fused activation) on both oneDNN tactics, with and without weights prepared at build
// time, run twice (the second run reuses reordered weights), and with the output in the residual's buffer.
TEST(Convolution, EpilogueOnEveryOnednnTacticMatchesTheReference) {
  ConvolutionAttrs a;
  a.pads = {1, 1, 1, 1};
  a.fused = FusedActivation::from(activation_defaults(ActivationKind::kSigmoid));
  const Dims xd{2, 16, 7, 7}, wd{16, 16, 3, 3}, yd{2, 16, 7, 7};
  auto fill = [](const Dims& d, int seed) {
    Tensor t = *Tensor::empty(DataType::kFloat32, d);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 37 + seed) % 23) / 23.f - 0.5f;
    return t;
  };
  const Tensor x = fill(xd, 1), w = fill(wd, 2), b = fill({16}, 3), r = fill(yd, 4);
  const OpSchema* s = OpRegistry::global().find("Convolution");
  OpCall call{s, &a, {f32(xd), f32(wd), f32({16}), f32(yd)}, {f32(yd)}, {nullptr, &w, nullptr, nullptr}};
  std::vector<Tensor> want{*Tensor::empty(DataType::kFloat32, yd)};
  ASSERT_TRUE(op_test::run_engine(call, Backend::kRef, {x, w, b, r}, want).is_ok());
  const KernelImpl* impl = KernelRegistry::global().find("Convolution", Backend::kCpu).at(0);
  ASSERT_EQ(impl->name, "cpu.onednn.convolution");
  ASSERT_TRUE(impl->supports(call).is_ok()) << impl->supports(call).message();
  for (const std::string& tactic : impl->tactics(call)) {
    for (bool prepare : {false, true}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(str_cat(tactic, prepare ? ", prepared" : "", in_place ? ", output in the residual" : ""));
        OpCall c = call;
        c.tactic = tactic;
        Tensor prepared;
        if (prepare) {
          auto p = impl->prepare(c);
          ASSERT_TRUE(p.is_ok()) << p.status().message();
          prepared = std::move(*p);
          c.prepared = prepared.defined() ? &prepared : nullptr;
        }
        auto kernel = impl->create(c);
        ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
        for (int run = 0; run < 2; ++run) {
          Tensor residual = *r.clone();
          Tensor y = in_place ? residual : *Tensor::empty(DataType::kFloat32, yd);
          KernelContext ctx{c, {x, w, b, residual}, {y}, cpu_stream(), cpu_allocator()};
          ASSERT_TRUE((*kernel)->run(ctx).is_ok());
          for (int64_t i = 0; i < y.numel(); ++i)
            ASSERT_NEAR(ctx.dst[0].data<float>()[i], want[0].data<float>()[i], 1e-5) << "at " << i << ", run " << run;
        }
        if (prepare && prepared.defined()) {
          EXPECT_NE((*kernel)->detail().find("weights prepared at build time"), std::string::npos)
              << (*kernel)->detail();
        }
      }
    }
  }
}

// The own NHWC kernels that keep transformed weights (cpu.winograd_nhwc, cpu.conv_gemm_nhwc), with the weights
// prepared at build time (where the kernel prepares), transformed from an engine constant, or given at run time (a
// second run with new weights in the same buffer follows them); y written over the residual. cpu.conv_gemm_nhwc: a
// 1x1 convolution over 300 channels (x read in place) and a 3x3 stride-2 one over 40 (gathered rows), both in three
// K blocks, so the residual is added before the later blocks' sums.
TEST(Convolution, OwnNhwcKernelsFollowRunTimeWeightsAndUsePreparedOnes) {
  auto fill = [](Tensor& t, int seed) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 37 + seed) % 23) / 23.f - 0.5f;
  };
  struct Case {
    const char* kernel;
    Dims x, w, y;
    std::vector<int64_t> strides, pads;
  };
  const Case cases[] = {
      {"cpu.winograd_nhwc", {2, 7, 5, 16}, {32, 3, 3, 16}, {2, 7, 5, 32}, {1, 1}, {1, 1, 1, 1}},
      {"cpu.conv_gemm_nhwc", {2, 3, 5, 300}, {40, 1, 1, 300}, {2, 3, 5, 40}, {1, 1}, {0, 0, 0, 0}},
      {"cpu.conv_gemm_nhwc", {1, 7, 6, 40}, {24, 3, 3, 40}, {1, 4, 3, 24}, {2, 2}, {1, 1, 1, 1}},
  };
  const OpSchema* s = OpRegistry::global().find("Convolution");
  for (const Case& k : cases) {
    const KernelImpl* impl = nullptr;
    for (const KernelImpl* candidate : KernelRegistry::global().find("Convolution", Backend::kCpu))
      if (candidate->name == k.kernel) impl = candidate;
    ASSERT_NE(impl, nullptr) << k.kernel;
    ConvolutionAttrs a;
    a.channels_last = true;
    a.strides = k.strides;
    a.pads = k.pads;
    a.fused = FusedActivation::from(activation_defaults(ActivationKind::kRelu));
    const int64_t m = k.w[0];
    Tensor x = *Tensor::empty(DataType::kFloat32, k.x), w = *Tensor::empty(DataType::kFloat32, k.w);
    Tensor b = *Tensor::empty(DataType::kFloat32, {m}), r = *Tensor::empty(DataType::kFloat32, k.y);
    fill(x, 1), fill(b, 3), fill(r, 4);
    for (const char* mode : {"prepared", "constant", "run time"}) {
      SCOPED_TRACE(str_cat(k.kernel, " ", k.w.to_string(), ", ", mode));
      const bool run_time = std::string(mode) == "run time", prepare = std::string(mode) == "prepared";
      if (prepare && !impl->prepare) continue;
      fill(w, 2);
      OpCall call{s, &a, {f32(k.x), f32(k.w), f32({m}), f32(k.y)}, {f32(k.y)}, {nullptr, run_time ? nullptr : &w}};
      const Status ok = impl->supports(call);
      if (!ok.is_ok()) GTEST_SKIP() << ok.message();  // a CPU without AVX2 and FMA
      Tensor prepared;
      if (prepare) {
        auto p = impl->prepare(call);
        ASSERT_TRUE(p.is_ok()) << p.status().message();
        prepared = std::move(*p);
        call.prepared = &prepared;
        fill(w, 9);  // the kernel must use the prepared copy, not the constant's later contents
      }
      auto kernel = impl->create(call);
      ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
      for (int run = 0; run < 2; ++run) {
        if (run_time) fill(w, 2 + 5 * run);  // new weights, same buffer
        Tensor used = *w.clone();
        if (!run_time) fill(used, 2);
        std::vector<Tensor> want{*Tensor::empty(DataType::kFloat32, k.y)};
        OpCall reference = call;
        reference.constants.clear();
        reference.prepared = nullptr;
        ASSERT_TRUE(op_test::run_engine(reference, Backend::kRef, {x, used, b, r}, want).is_ok());
        Tensor y = *r.clone();  // the output written over the residual
        KernelContext ctx{call, {x, w, b, y}, {y}, cpu_stream(), cpu_allocator()};
        ASSERT_TRUE((*kernel)->run(ctx).is_ok());
        for (int64_t i = 0; i < y.numel(); ++i)
          ASSERT_NEAR(y.data<float>()[i], want[0].data<float>()[i], 1e-4) << "at " << i << ", run " << run;
      }
    }
  }
}

// A fused activation oneDNN has no post-op for is refused by every CPU kernel, with the reason.
TEST(Convolution, CpuRefusesAFusedActivationWithoutAPostOp) {
  ConvolutionAttrs a;
  a.fused = FusedActivation::from(activation_defaults(ActivationKind::kCelu));
  const OpSchema* s = OpRegistry::global().find("Convolution");
  OpCall call{s, &a, {f32({1, 2, 5, 5}), f32({3, 2, 3, 3})}, {f32({1, 3, 3, 3})}};
  auto impl = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_FALSE(impl.is_ok());
  EXPECT_NE(impl.status().message().find("oneDNN has no eltwise post-op for a fused celu"), std::string::npos)
      << impl.status().message();
  EXPECT_NE(impl.status().message().find("the CPU convolution loops take no epilogue"), std::string::npos)
      << impl.status().message();
}

}  // namespace
}  // namespace kiln
