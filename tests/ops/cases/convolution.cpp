#include "ops/convolution/convolution.h"
#include "harness.h"
#include "ops/activation/activation.h"

namespace kiln::harness {
namespace {

using V = std::vector<int64_t>;

ConvolutionAttrs conv(V strides = {}, V pads = {}, V dilations = {}, int64_t group = 1,
                      AutoPad auto_pad = AutoPad::kNotSet) {
  ConvolutionAttrs a;
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  a.dilations = std::move(dilations);
  a.group = group;
  a.auto_pad = auto_pad;
  return a;
}

DeconvolutionAttrs deconv(V strides = {}, V pads = {}, V dilations = {}, int64_t group = 1,
                          AutoPad auto_pad = AutoPad::kNotSet) {
  DeconvolutionAttrs a;
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  a.dilations = std::move(dilations);
  a.group = group;
  a.auto_pad = auto_pad;
  return a;
}

OpCase conv_case(std::string name, ConvolutionAttrs a, Dims x, Dims w, bool bias = true) {
  OpCase c{"Convolution", std::move(name), attrs(a), {uniform(x), uniform(w)}};
  if (bias) c.inputs.push_back(uniform({w[0]}));
  return c;
}

OpCase deconv_case(std::string name, DeconvolutionAttrs a, Dims x, Dims w, bool bias = true) {
  const int64_t m = w[1] * a.group;
  OpCase c{"Deconvolution", std::move(name), attrs(a), {uniform(x), uniform(w)}};
  if (bias) c.inputs.push_back(uniform({m}));
  return c;
}

std::vector<OpCase> convolution_cases() {
  std::vector<OpCase> c;
  c.push_back(conv_case("1-D k3", conv(), {2, 3, 10}, {4, 3, 3}));
  c.push_back(conv_case("1-D stride 2 pad 1", conv({2}, {1, 1}), {1, 3, 11}, {2, 3, 4}));
  c.push_back(conv_case("2-D 3x3 pad 1", conv({}, {1, 1, 1, 1}), {1, 3, 8, 8}, {4, 3, 3, 3}));
  c.push_back(conv_case("2-D stride 2", conv({2, 2}, {1, 1, 1, 1}), {2, 3, 9, 9}, {4, 3, 3, 3}));
  c.push_back(conv_case("2-D strides 1x3", conv({1, 3}), {1, 2, 7, 10}, {3, 2, 2, 3}));
  c.push_back(conv_case("2-D dilation 2", conv({}, {}, {2, 2}), {1, 3, 9, 9}, {4, 3, 3, 3}));
  c.push_back(conv_case("2-D dilation 2x3 stride 2", conv({2, 2}, {2, 1, 2, 1}, {2, 3}), {1, 2, 9, 10}, {3, 2, 3, 2}));
  c.push_back(conv_case("asymmetric pads", conv({}, {0, 1, 2, 0}), {1, 2, 7, 6}, {3, 2, 3, 2}));
  c.push_back(conv_case("pads larger than kernel", conv({}, {3, 0, 2, 4}), {1, 2, 5, 5}, {2, 2, 2, 2}));
  c.push_back(
      conv_case("same_upper stride 2", conv({2, 2}, {}, {}, 1, AutoPad::kSameUpper), {1, 2, 7, 8}, {3, 2, 4, 3}));
  c.push_back(
      conv_case("same_lower stride 2", conv({2, 2}, {}, {}, 1, AutoPad::kSameLower), {1, 2, 7, 8}, {3, 2, 4, 3}));
  c.push_back(
      conv_case("same_upper dilation 2", conv({}, {}, {2, 2}, 1, AutoPad::kSameUpper), {1, 2, 6, 5}, {2, 2, 2, 3}));
  c.push_back(conv_case("valid stride 3", conv({3, 3}, {}, {}, 1, AutoPad::kValid), {1, 2, 10, 11}, {3, 2, 3, 3}));
  c.push_back(conv_case("group 2", conv({}, {1, 1, 1, 1}, {}, 2), {1, 4, 6, 6}, {6, 2, 3, 3}));
  c.push_back(conv_case("depthwise", conv({}, {1, 1, 1, 1}, {}, 4), {2, 4, 6, 6}, {4, 1, 3, 3}));
  c.push_back(
      conv_case("depthwise multiplier 2 stride 2", conv({2, 2}, {1, 1, 1, 1}, {}, 3), {1, 3, 7, 7}, {6, 1, 3, 3}));
  c.push_back(conv_case("no bias", conv({}, {1, 0, 1, 0}), {1, 3, 6, 6}, {5, 3, 3, 3}, false));
  c.push_back(conv_case("1x1", conv(), {2, 8, 5, 5}, {6, 8, 1, 1}));
  ConvolutionAttrs with_kernel_shape = conv({2, 1});
  with_kernel_shape.kernel_shape = {3, 2};
  c.push_back(conv_case("kernel_shape given", with_kernel_shape, {1, 2, 7, 5}, {2, 2, 3, 2}));
  c.push_back(conv_case("3-D 3x3x3 pad 1", conv({}, {1, 1, 1, 1, 1, 1}), {1, 2, 5, 5, 5}, {3, 2, 3, 3, 3}));
  c.push_back(conv_case("3-D stride dilation groups", conv({2, 1, 2}, {1, 0, 0, 0, 1, 1}, {1, 2, 1}, 2),
                        {1, 4, 6, 6, 5}, {4, 2, 2, 3, 2}));
  c.push_back(conv_case("empty batch", conv(), {0, 2, 5, 5}, {3, 2, 3, 3}));
  // 32 channels x 3x3 = 288 products per output; f32 only to keep the reference quick.
  OpCase big = conv_case("2-D 32ch 28x28 3x3", conv({}, {1, 1, 1, 1}), {1, 32, 28, 28}, {32, 32, 3, 3});
  big.dtypes = {DataType::kFloat32};
  big.tolerance_scale = 2;
  c.push_back(big);
  return c;
}

// A 2-D convolution with the optimizer's epilogue: act(conv(x, w) + b + residual). `x` in [-range, range] reaches the
// activation's interesting range (relu6's 6, sigmoid's tails).
OpCase fused_case(std::string name, FusedActivation act, bool residual, Dims x = {1, 3, 8, 8}, Dims w = {4, 3, 3, 3},
                  double range = 1.0) {
  const int64_t ph = (w[2] - 1) / 2, pw = (w[3] - 1) / 2;  // odd kernels: the output keeps x's size
  ConvolutionAttrs a = conv({}, {ph, pw, ph, pw});
  a.fused = act;
  OpCase c = conv_case(std::move(name), a, x, w);
  c.inputs[0] = uniform(x, -range, range);
  if (residual) c.inputs.push_back(uniform({x[0], w[0], x[2], x[3]}, -range, range));
  return c;
}

FusedActivation fused(ActivationKind kind, std::optional<std::pair<float, float>> alpha_beta = std::nullopt) {
  FusedActivation f = FusedActivation::from(activation_defaults(kind));
  if (alpha_beta) std::tie(f.alpha, f.beta) = *alpha_beta;
  return f;
}

std::vector<OpCase> fused_convolution_cases() {
  std::vector<OpCase> c;
  c.push_back(fused_case("fused relu", fused(ActivationKind::kRelu), false));
  c.push_back(fused_case("fused relu6 (clip 0..6)", fused(ActivationKind::kClip, {{0.f, 6.f}}), false, {1, 3, 8, 8},
                         {4, 3, 3, 3}, 3.0));
  c.push_back(fused_case("fused clip -0.5..0.5", fused(ActivationKind::kClip, {{-0.5f, 0.5f}}), false));
  c.push_back(fused_case("fused sigmoid", fused(ActivationKind::kSigmoid), false, {1, 3, 8, 8}, {4, 3, 3, 3}, 3.0));
  c.push_back(fused_case("fused silu", fused(ActivationKind::kSilu), false, {1, 3, 8, 8}, {4, 3, 3, 3}, 3.0));
  c.push_back(fused_case("residual", FusedActivation{}, true));
  c.push_back(fused_case("residual + relu", fused(ActivationKind::kRelu), true));
  // Every other kind: the CPU maps most to oneDNN eltwise post-ops (some as chains) and declines the rest.
  for (ActivationKind k :
       {ActivationKind::kLeakyRelu, ActivationKind::kElu, ActivationKind::kSelu, ActivationKind::kHardSigmoid,
        ActivationKind::kTanh, ActivationKind::kSoftplus, ActivationKind::kSoftsign, ActivationKind::kGelu,
        ActivationKind::kHardSwish, ActivationKind::kMish, ActivationKind::kThresholdedRelu, ActivationKind::kCelu})
    c.push_back(fused_case(str_cat("fused ", enum_name(k)), fused(k), false, {1, 3, 6, 6}, {4, 3, 3, 3}, 2.0));
  c.push_back(fused_case("fused gelu tanh", fused(ActivationKind::kGelu, {{0.f, 1.f}}), false));
  c.push_back(fused_case("fused scaled tanh", fused(ActivationKind::kScaledTanh, {{1.5f, 0.7f}}), false));
  c.push_back(fused_case("fused leaky relu 0.2 + residual", fused(ActivationKind::kLeakyRelu, {{0.2f, 0.f}}), true));
  // Channels in oneDNN's blocked layouts (the residual is reordered into the blocked dst).
  OpCase wide =
      fused_case("residual + relu 32ch 1x1", fused(ActivationKind::kRelu), true, {2, 32, 7, 7}, {32, 32, 1, 1});
  c.push_back(std::move(wide));
  // cuDNN: 16 channels suit tensor-op algorithms in float16/bfloat16; bias + residual + ReLU is what one
  // cudnnConvolutionBiasActivationForward call computes, a sigmoid it lacks runs in kiln's epilogue kernel, and without
  // a bias there is no fused call at all.
  OpCase half_fused =
      fused_case("residual + relu 16ch 3x3", fused(ActivationKind::kRelu), true, {2, 16, 6, 6}, {16, 16, 3, 3});
  half_fused.tolerance_scale = 2;  // 16 channels x 3x3 per output
  c.push_back(std::move(half_fused));
  c.push_back(fused_case("residual + sigmoid", fused(ActivationKind::kSigmoid), true, {1, 3, 8, 8}, {4, 3, 3, 3}, 3.0));
  OpCase no_bias = fused_case("no bias, residual + relu", fused(ActivationKind::kRelu), true);
  no_bias.inputs[2] = absent();  // the residual stays input 3
  c.push_back(std::move(no_bias));
  return c;
}

// channels_last (the layout-nhwc pass's layers): x [N, H, W, C], w [M, kH, kW, C/G], residual and y [N, Ho, Wo, M].
// 8 and 16 channels suit cuDNN's NHWC tensor-op kernels in float16/bfloat16.
OpCase nhwc_case(std::string name, ConvolutionAttrs a, Dims x, Dims w, bool bias = true, bool residual = false) {
  a.channels_last = true;
  // The output size (pads given as 4 values in these cases).
  const int64_t ho = (x[1] + a.pads[0] + a.pads[2] - w[1]) / (a.strides.empty() ? 1 : a.strides[0]) + 1;
  const int64_t wo = (x[2] + a.pads[1] + a.pads[3] - w[2]) / (a.strides.empty() ? 1 : a.strides[1]) + 1;
  OpCase c = conv_case(std::move(name), a, x, w, bias);
  if (residual) {
    if (!bias) c.inputs.push_back(absent());
    c.inputs.push_back(uniform({x[0], ho, wo, w[0]}));
  }
  c.tolerance_scale = 2;  // up to 16 channels x 3x3 per output
  return c;
}

// `a` with a Clip epilogue to [0, 0.5] (ReLU6 at the scale of the cases' values).
ConvolutionAttrs clip_epilogue(ConvolutionAttrs a) {
  a.fused = fused(ActivationKind::kClip, std::make_pair(0.f, 0.5f));
  return a;
}

std::vector<OpCase> channels_last_cases() {
  std::vector<OpCase> c;
  c.push_back(nhwc_case("nhwc 3x3 pad 1 bias", conv({}, {1, 1, 1, 1}), {2, 6, 6, 16}, {16, 3, 3, 16}));
  ConvolutionAttrs relu = conv({}, {1, 1, 1, 1});
  relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc residual + relu", relu, {2, 6, 6, 16}, {16, 3, 3, 16}, true, true));
  c.push_back(nhwc_case("nhwc no bias, residual + relu", relu, {1, 5, 5, 8}, {8, 3, 3, 8}, false, true));
  ConvolutionAttrs sigmoid = conv({}, {1, 1, 1, 1});
  sigmoid.fused = fused(ActivationKind::kSigmoid);
  c.push_back(nhwc_case("nhwc residual + sigmoid", sigmoid, {1, 5, 6, 8}, {8, 3, 3, 8}, true, true));
  // 3x3 stride 1 with channels in multiples of 8 / 16 (cpu.winograd_nhwc too): odd output sizes (tiles cut at the
  // edge), no padding, asymmetric pads, Clip after a residual.
  ConvolutionAttrs wino_clip = clip_epilogue(conv({}, {1, 1, 1, 1}));
  c.push_back(nhwc_case("nhwc 3x3 odd size, residual + clip", wino_clip, {2, 7, 5, 24}, {32, 3, 3, 24}, true, true));
  c.push_back(nhwc_case("nhwc 3x3 no pad", conv({}, {0, 0, 0, 0}), {1, 8, 9, 16}, {16, 3, 3, 16}));
  c.push_back(nhwc_case("nhwc 3x3 asymmetric pads", conv({}, {0, 1, 2, 0}), {1, 6, 7, 8}, {16, 3, 3, 8}, false));
  // 14x14 outputs: 49 F(2x2) tiles, which the AVX-512 products take in 7 strips of 7 rows; 16 F(4x4) tiles (2 of 8);
  // 28x28 in blocks of tiles dealt evenly over the threads (28 strips of 7); both with a residual + ReLU.
  c.push_back(nhwc_case("nhwc 3x3 14x14, residual + relu", relu, {1, 14, 14, 16}, {32, 3, 3, 16}, true, true));
  c.push_back(nhwc_case("nhwc 3x3 28x28, residual + relu", relu, {1, 28, 28, 8}, {16, 3, 3, 8}, true, true));
  // Weights over the blocked path's 1 MB (every tile's products at once, not block by block) in an odd number of
  // 16-channel panels (the AVX-512 products take them in pairs, the last alone), with a residual + ReLU.
  OpCase wide_wino =
      nhwc_case("nhwc 3x3 136 -> 144 channels, residual + relu", relu, {1, 6, 5, 136}, {144, 3, 3, 136}, true, true);
  wide_wino.tolerance_scale = 4;  // 1224 products per output
  c.push_back(wide_wino);
  // 1x1 stride 1: 70 rows, residual + ReLU; Clip, no bias.
  ConvolutionAttrs pw_relu = conv({}, {0, 0, 0, 0});
  pw_relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc 1x1 residual + relu", pw_relu, {2, 5, 7, 24}, {32, 1, 1, 24}, true, true));
  c.push_back(
      nhwc_case("nhwc 1x1 clip, no bias", clip_epilogue(conv({}, {0, 0, 0, 0})), {1, 4, 4, 8}, {16, 1, 1, 8}, false));
  c.push_back(nhwc_case("nhwc group 2", conv({}, {1, 1, 1, 1}, {}, 2), {1, 6, 6, 16}, {16, 3, 3, 8}));
  c.push_back(nhwc_case("nhwc depthwise", conv({}, {1, 1, 1, 1}, {}, 8), {2, 6, 6, 8}, {8, 3, 3, 1}));
  // MobileNetV2's depthwise layers (cpu.depthwise_nhwc): stride 2 + Clip (ReLU6), a channel count off the vector
  // width, dilation with asymmetric pads, and a residual with ReLU.
  ConvolutionAttrs dw_clip = clip_epilogue(conv({2, 2}, {1, 1, 1, 1}, {}, 20));
  c.push_back(nhwc_case("nhwc depthwise stride 2 clip, 20 channels", dw_clip, {2, 9, 8, 20}, {20, 3, 3, 1}));
  c.push_back(nhwc_case("nhwc depthwise dilation 2, asymmetric pads, no bias", conv({}, {2, 0, 1, 2}, {2, 2}, 12),
                        {1, 7, 6, 12}, {12, 3, 3, 1}, false));
  // Depthwise with channels in multiples of 8: stride 2 with a residual + ReLU and odd sizes; dilation 2 with
  // asymmetric pads, Clip, no bias.
  ConvolutionAttrs dw_s2_relu = conv({2, 2}, {1, 1, 1, 1}, {}, 24);
  dw_s2_relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc depthwise stride 2 residual + relu, 24 channels", dw_s2_relu, {2, 9, 7, 24},
                        {24, 3, 3, 1}, true, true));
  c.push_back(nhwc_case("nhwc depthwise dilation 2 clip, 16 channels",
                        clip_epilogue(conv({}, {2, 1, 0, 2}, {2, 2}, 16)), {1, 8, 7, 16}, {16, 3, 3, 1}, false));
  // A mobile network's stem (cpu.conv_nhwc_few_channels): 3 channels, 3x3 stride 2 + Clip; 2 channels into 12 (off
  // the vector width) with a residual + ReLU.
  c.push_back(nhwc_case("nhwc stem 3x3 stride 2 clip, 3 channels", clip_epilogue(conv({2, 2}, {1, 1, 1, 1})),
                        {2, 9, 9, 3}, {16, 3, 3, 3}));
  ConvolutionAttrs few_relu = conv({}, {1, 0, 1, 1});
  few_relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc 2 channels into 12, residual + relu", few_relu, {1, 6, 7, 2}, {12, 3, 2, 2}, true, true));
  ConvolutionAttrs dw_relu = conv({}, {2, 2, 2, 2}, {}, 16);
  dw_relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc depthwise 5x5 residual + relu", dw_relu, {2, 6, 5, 16}, {16, 5, 5, 1}, true, true));
  // Rows wide enough for cpu.depthwise_nhwc's 4-pixel tiles: 40 channels (16 + 16 + 8) with a residual and Clip;
  // 13 channels (8 + a masked 5) through a 5x3 window with stride 2, dilation 2 and uneven pads; no pads at all.
  c.push_back(nhwc_case("nhwc depthwise tiles, 40 channels 19 wide, residual + clip",
                        clip_epilogue(conv({}, {1, 1, 1, 1}, {}, 40)), {1, 5, 19, 40}, {40, 3, 3, 1}, true, true));
  c.push_back(nhwc_case("nhwc depthwise tiles, 13 channels 5x3 stride 2 dilation 2, no bias",
                        conv({2, 2}, {2, 1, 3, 2}, {2, 2}, 13), {2, 11, 23, 13}, {13, 5, 3, 1}, false));
  ConvolutionAttrs dw_unpadded = conv({}, {0, 0, 0, 0}, {}, 24);
  dw_unpadded.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc depthwise tiles, no pads + relu", dw_unpadded, {1, 4, 12, 24}, {24, 3, 3, 1}));
  c.push_back(nhwc_case("nhwc stride 2", conv({2, 2}, {1, 1, 1, 1}), {2, 9, 9, 8}, {16, 3, 3, 8}));
  c.push_back(
      nhwc_case("nhwc 1x1 stride 2 + residual", conv({2, 2}, {0, 0, 0, 0}), {2, 7, 7, 16}, {8, 1, 1, 16}, true, true));
  // A 1x1 window that cannot read x in place for its pads alone (cpu.conv_gemm_nhwc gathers its rows first), and one
  // with stride 2 and uneven pads, 40 channels into 48 (a panel and a half).
  c.push_back(
      nhwc_case("nhwc 1x1 pads 1 + residual", conv({}, {1, 1, 1, 1}), {1, 5, 6, 16}, {32, 1, 1, 16}, true, true));
  c.push_back(nhwc_case("nhwc 1x1 stride 2, pads 0 1 1 0", conv({2, 2}, {0, 1, 1, 0}), {2, 8, 9, 40}, {48, 1, 1, 40}));
  c.push_back(
      nhwc_case("nhwc 7x7 stride 2 pad 3, 3 channels", conv({2, 2}, {3, 3, 3, 3}), {1, 12, 12, 3}, {8, 7, 7, 3}));
  c.push_back(nhwc_case("nhwc strides 1x2 no bias", conv({1, 2}, {0, 1, 0, 1}), {1, 5, 8, 4}, {6, 2, 3, 4}, false));
  // cpu.conv_nhwc_few_channels' AVX-512 tiles: ResNet's 7x7 stride-2 stem into 64 + 8 channels (a 6-pixel tile of
  // 4 vectors, then one vector under a mask) with a residual and ReLU; 3 -> 40 channels (3 vectors, 8 pixels) and
  // 4 -> 32 channels (2 vectors, 12 pixels), rows wide enough for whole tiles and the borders either side.
  ConvolutionAttrs stem_relu = conv({2, 2}, {3, 3, 3, 3});
  stem_relu.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc stem 7x7 stride 2, 3 -> 72 channels, residual + relu", stem_relu, {1, 20, 21, 3},
                        {72, 7, 7, 3}, true, true));
  c.push_back(nhwc_case("nhwc stem 3x3 stride 2 clip, 3 -> 40 channels, 31 wide",
                        clip_epilogue(conv({2, 2}, {1, 1, 1, 1})), {2, 9, 31, 3}, {40, 3, 3, 3}));
  ConvolutionAttrs stem_s1 = conv({}, {1, 1, 1, 1});
  stem_s1.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc 3x3 4 -> 32 channels, 30 wide, relu", stem_s1, {1, 4, 30, 4}, {32, 3, 3, 4}, false));
  // ResNet's downsampling block: 3x3 stride 2 to twice the channels with bias + ReLU, the 1x1 projection with bias
  // and a 1x1 expansion with bias + residual + ReLU (the cuDNN graph tactics' runtime-fused engines).
  ConvolutionAttrs down = conv({2, 2}, {1, 1, 1, 1});
  down.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc 3x3 stride 2 16->32 bias relu", down, {2, 10, 10, 16}, {32, 3, 3, 16}));
  ConvolutionAttrs expand = conv({}, {0, 0, 0, 0});
  expand.fused = fused(ActivationKind::kRelu);
  c.push_back(nhwc_case("nhwc 1x1 32->64 bias residual relu", expand, {2, 5, 5, 32}, {64, 1, 1, 32}, true, true));
  // cpu.conv_gemm_nhwc: more channels than one K block (128) and filters off the 16-column panels, with a residual and
  // an activation the kernel applies after storing (sigmoid); a stem-like 3-channel 3x3 stride 2 with asymmetric pads
  // and dilation (gathered rows, taps in the padding).
  ConvolutionAttrs deep = conv({}, {0, 0, 0, 0});
  deep.fused = fused(ActivationKind::kSigmoid);
  OpCase deep_case =
      nhwc_case("nhwc 1x1 300->40 residual + sigmoid", deep, {1, 7, 5, 300}, {40, 1, 1, 300}, true, true);
  deep_case.tolerance_scale = 4;  // 300 products per output
  c.push_back(deep_case);
  c.push_back(nhwc_case("nhwc 3 channels 3x3 stride 2 dilation 2, asymmetric pads, clip",
                        clip_epilogue(conv({2, 2}, {2, 1, 0, 2}, {2, 2})), {2, 11, 9, 3}, {20, 3, 3, 3}));
  return c;
}

// Channel blocks (the layout-blocked pass's layers, oneDNN's nChw8c): x [N, C/B, H, W, B] (NCHW with plain_input),
// w [M, C/G, kH, kW], residual and y [N, M/B, Ho, Wo, B]. `x` and `w` are given as NCHW dims.
OpCase blocked_case(std::string name, ConvolutionAttrs a, Dims x, Dims w, bool bias = true, bool residual = false,
                    int64_t block = 8) {
  a.channel_block = block;
  a.plain_input = x[1] % block != 0;
  const int64_t ho = (x[2] + a.pads[0] + a.pads[2] - w[2]) / (a.strides.empty() ? 1 : a.strides[0]) + 1;
  const int64_t wo = (x[3] + a.pads[1] + a.pads[3] - w[3]) / (a.strides.empty() ? 1 : a.strides[1]) + 1;
  OpCase c = conv_case(std::move(name), a, a.plain_input ? x : nchw_to_blocked(x, block), w, bias);
  if (residual) {
    if (!bias) c.inputs.push_back(absent());
    c.inputs.push_back(uniform({x[0], w[0] / block, ho, wo, block}));
  }
  c.dtypes = {DataType::kFloat32};
  c.tolerance_scale = 2;  // up to 16 channels x 3x3 per output
  return c;
}

std::vector<OpCase> channel_block_cases() {
  std::vector<OpCase> c;
  c.push_back(blocked_case("blocks 3x3 pad 1, 16 into 24, residual + clip", clip_epilogue(conv({}, {1, 1, 1, 1})),
                           {2, 16, 7, 6}, {24, 16, 3, 3}, true, true));
  c.push_back(blocked_case("blocks depthwise stride 2, 32 channels, clip",
                           clip_epilogue(conv({2, 2}, {1, 1, 1, 1}, {}, 32)), {1, 32, 9, 8}, {32, 1, 3, 3}));
  c.push_back(
      blocked_case("blocks 1x1, 16 into 8, no bias", conv({}, {0, 0, 0, 0}), {2, 16, 5, 5}, {8, 16, 1, 1}, false));
  ConvolutionAttrs stem = clip_epilogue(conv({2, 2}, {1, 1, 1, 1}));
  c.push_back(blocked_case("blocks stem: 3 NCHW channels into 16, stride 2", stem, {2, 3, 11, 10}, {16, 3, 3, 3}));
  ConvolutionAttrs relu = conv({}, {0, 1, 2, 1});
  relu.fused = fused(ActivationKind::kRelu);
  c.push_back(
      blocked_case("blocks asymmetric pads, residual + relu, no bias", relu, {1, 8, 6, 7}, {16, 8, 3, 2}, false, true));
  // Blocks of 16 (oneDNN's nChw16c, the AVX-512 layout), which the kernel also describes.
  c.push_back(blocked_case("blocks of 16, 32 into 16, residual + clip", clip_epilogue(conv({}, {1, 1, 1, 1})),
                           {1, 32, 5, 6}, {16, 32, 3, 3}, true, true, 16));
  return c;
}

std::vector<OpCase> deconvolution_cases() {
  std::vector<OpCase> c;
  c.push_back(deconv_case("1-D stride 2", deconv({2}), {1, 3, 5}, {3, 2, 3}));
  c.push_back(deconv_case("2-D stride 1", deconv(), {2, 3, 4, 4}, {3, 2, 3, 3}));
  c.push_back(deconv_case("2-D stride 2 pad 1", deconv({2, 2}, {1, 1, 1, 1}), {1, 4, 4, 4}, {4, 3, 3, 3}));
  DeconvolutionAttrs op = deconv({2, 3}, {1, 1, 1, 1});
  op.output_padding = {1, 2};
  c.push_back(deconv_case("output_padding", op, {1, 2, 4, 3}, {2, 3, 3, 3}));
  DeconvolutionAttrs os = deconv({2, 2});
  os.output_shape = {8, 9};
  c.push_back(deconv_case("output_shape", os, {1, 2, 4, 4}, {2, 3, 3, 3}));
  DeconvolutionAttrs os_full = deconv({2, 2}, {}, {}, 1, AutoPad::kSameUpper);
  os_full.output_shape = {1, 3, 8, 7};
  c.push_back(deconv_case("output_shape full same_upper", os_full, {1, 2, 4, 4}, {2, 3, 3, 3}));
  DeconvolutionAttrs os_one = deconv({2, 2});
  os_one.output_shape = {8, 8};  // full output 7: the end pad is -1
  c.push_back(deconv_case("output_shape one beyond full output", os_one, {1, 2, 3, 3}, {2, 2, 3, 3}));
  DeconvolutionAttrs os_big = deconv({2, 2});
  os_big.output_shape = {8, 10};
  c.push_back(deconv_case("output_shape beyond full output", os_big, {1, 2, 3, 3}, {2, 2, 3, 3}));
  c.push_back(
      deconv_case("same_upper stride 2", deconv({2, 2}, {}, {}, 1, AutoPad::kSameUpper), {1, 2, 4, 5}, {2, 2, 3, 4}));
  c.push_back(
      deconv_case("same_lower stride 2", deconv({2, 2}, {}, {}, 1, AutoPad::kSameLower), {1, 2, 4, 5}, {2, 2, 3, 4}));
  c.push_back(deconv_case("valid", deconv({2, 1}, {}, {}, 1, AutoPad::kValid), {1, 2, 3, 4}, {2, 2, 3, 3}));
  c.push_back(deconv_case("asymmetric pads", deconv({2, 2}, {0, 1, 2, 0}), {1, 2, 4, 4}, {2, 3, 3, 3}));
  // More padding at the end than at the beginning (CUDA: written longer, then cropped).
  c.push_back(deconv_case("1-D end pad above begin pad", deconv({2}, {0, 2}), {2, 3, 5}, {3, 2, 3}));
  c.push_back(deconv_case("dilation 2", deconv({1, 2}, {}, {2, 2}), {1, 2, 5, 5}, {2, 2, 3, 3}));
  c.push_back(deconv_case("group 2", deconv({2, 2}, {1, 1, 1, 1}, {}, 2), {1, 4, 5, 5}, {4, 3, 3, 3}));
  c.push_back(deconv_case("depthwise", deconv({2, 2}, {}, {}, 3), {1, 3, 5, 5}, {3, 1, 3, 3}));
  c.push_back(deconv_case("no bias", deconv({2, 2}), {1, 3, 4, 4}, {3, 2, 2, 2}, false));
  c.push_back(deconv_case("1x1", deconv(), {2, 6, 4, 4}, {6, 5, 1, 1}));
  c.push_back(deconv_case("3-D stride 2", deconv({2, 2, 2}, {1, 0, 1, 0, 1, 1}), {1, 2, 3, 3, 3}, {2, 2, 3, 3, 3}));
  OpCase big = deconv_case("2-D 32ch 14x14 stride 2", deconv({2, 2}, {1, 1, 1, 1}), {1, 32, 14, 14}, {32, 32, 4, 4});
  big.dtypes = {DataType::kFloat32};
  big.tolerance_scale = 2;  // 32 channels x 4 taps per output
  c.push_back(big);
  return c;
}

}  // namespace

KILN_OP_CASES(convolution) {
  std::vector<OpCase> cases = convolution_cases();
  for (OpCase& c : fused_convolution_cases()) cases.push_back(std::move(c));
  for (OpCase& c : channels_last_cases()) cases.push_back(std::move(c));
  for (OpCase& c : channel_block_cases()) cases.push_back(std::move(c));
  for (OpCase& c : deconvolution_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace kiln::harness
