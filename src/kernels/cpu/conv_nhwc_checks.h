#pragma once
// The checks the own channels_last (NHWC) convolution kernels share (cpu.depthwise_nhwc,
// cpu.conv_nhwc_few_channels, cpu.winograd_nhwc, cpu.conv_gemm_nhwc).
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln::cpu {

/// channels_last 2-D float32 convolutions with static weight dims.
inline Status nhwc_float32_conv(const OpCall& call) {
  if (!call.attrs_as<ConvolutionAttrs>().channels_last)
    return unsupported("takes channels_last (NHWC) convolutions only");
  if (call.inputs[0].dims.rank() != 4 || call.inputs[1].dims.rank() != 4 || !call.inputs[1].dims.is_static())
    return unsupported("takes 2-D convolutions with static weight dims only");
  for (const TensorDesc& in : call.inputs)
    if (in.present && in.dtype != DataType::kFloat32)
      return unsupported("takes float32 only, not ", dtype_name(in.dtype));
  return Status::ok();
}

/// No fused activation, or ReLU or Clip (what the direct and Winograd kernels apply in registers).
inline Status relu_or_clip_epilogue(const OpCall& call) {
  const FusedActivation& f = call.attrs_as<ConvolutionAttrs>().fused;
  if (f.on && f.kind != ActivationKind::kRelu && f.kind != ActivationKind::kClip)
    return unsupported("applies ReLU and Clip epilogues only");
  return Status::ok();
}

}  // namespace kiln::cpu
