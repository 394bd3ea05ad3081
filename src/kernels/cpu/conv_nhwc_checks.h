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

/// No negative pads (checked where the input dims are known; a dynamic input is checked by the window at run time).
inline Status no_negative_pads(const OpCall& call) {
  const Dims& x = call.inputs[0].dims;
  if (!x.is_static()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(call.attrs_as<ConvolutionAttrs>(), x, call.inputs[1].dims));
  for (int i = 0; i < win.rank(); ++i)
    if (win.pads_begin[i] < 0 || win.pads_end[i] < 0) return unsupported("takes no negative pads");
  return Status::ok();
}

}  // namespace kiln::cpu
