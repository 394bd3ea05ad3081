#pragma once
// Convolution (ONNX Conv) and Deconvolution (ONNX ConvTranspose) over 1-D, 2-D and 3-D inputs,
// plus the window geometry helpers that pooling and the ONNX importer share.
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/dims.h"
#include "kiln/status.h"
#include "ops/activation/activation.h"
#include "ops/attrs.h"

namespace kiln {

/// ONNX auto_pad. kNotSet uses the explicit pads; kSame* pad so that out = ceil(in / stride)
/// (Convolution) or out = in * stride (Deconvolution), an odd extra pad going to the end (upper)
/// or the beginning (lower); kValid pads nothing.
enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

const char* enum_name(AutoPad pad);

/// Convolution inputs: x, w, b (optional) and residual (optional, the output's dtype and dims; set by the
/// optimizer). y = fused(conv(x, w) + b + residual), `fused` an activation the optimizer fused (off by default).
/// With `channels_last` (set by the layout-nhwc pass; 2-D only) x is [N, H, W, C], w [M, kH, kW, C/group], and
/// the residual and y are [N, Ho, Wo, M]. With `channel_block` B (set by the layout-blocked pass; 2-D only, C and M
/// multiples of B) the activations are in blocks of B channels, oneDNN's nChw8c for B = 8: x is [N, C/B, H, W, B]
/// (or NCHW with `plain_input`: a stem over a few channels), the residual and y [N, M/B, Ho, Wo, B]; w stays
/// [M, C/group, kH, kW].
struct ConvolutionAttrs : AttrsOf<ConvolutionAttrs> {
  std::vector<int64_t> kernel_shape;  ///< empty: taken from w
  std::vector<int64_t> strides;       ///< empty: all 1
  std::vector<int64_t> pads;          ///< begin..., end...; empty: all 0
  std::vector<int64_t> dilations;     ///< empty: all 1
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::kNotSet;
  FusedActivation fused;       ///< the epilogue's activation
  bool channels_last = false;  ///< NHWC activations and [M, kH, kW, C/group] weights (2-D only)
  int64_t channel_block = 0;   ///< activations in blocks of this many channels (0: none; 2-D only)
  bool plain_input = false;    ///< with channel_block: x stays NCHW (only y and the residual are blocked)

  template <class V>
  void visit(V& v) {
    v("kernel_shape", kernel_shape);
    v("strides", strides);
    v("pads", pads);
    v("dilations", dilations);
    v("group", group);
    v("auto_pad", auto_pad);
    fused.visit(v);
    v("channels_last", channels_last);
    v("channel_block", channel_block);
    v("plain_input", plain_input);
  }
};

/// Whether a Convolution node has an epilogue beyond its bias: a residual input or a fused activation.
inline bool has_conv_epilogue(const ConvolutionAttrs& attrs, bool has_residual) {
  return attrs.fused.on || has_residual;
}

struct DeconvolutionAttrs : AttrsOf<DeconvolutionAttrs> {
  std::vector<int64_t> kernel_shape;    ///< empty: taken from w
  std::vector<int64_t> strides;         ///< empty: all 1
  std::vector<int64_t> pads;            ///< begin..., end...; ignored when output_shape is set
  std::vector<int64_t> dilations;       ///< empty: all 1
  std::vector<int64_t> output_padding;  ///< extra size at the end of each axis; empty: all 0
  std::vector<int64_t> output_shape;    ///< spatial output size (or the full output shape); pads follow
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::kNotSet;

  template <class V>
  void visit(V& v) {
    v("kernel_shape", kernel_shape);
    v("strides", strides);
    v("pads", pads);
    v("dilations", dilations);
    v("output_padding", output_padding);
    v("output_shape", output_shape);
    v("group", group);
    v("auto_pad", auto_pad);
  }
};

/// A sliding window over the spatial axes, fully resolved: one entry per spatial axis.
/// For a dynamic input size the output size is kDynamicDim and same-pads are 0 (unknown).
struct ConvWindow {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output;  ///< output spatial sizes

  int rank() const { return static_cast<int>(kernel.size()); }
  /// (kernel - 1) * dilation + 1 on `axis`.
  int64_t extent(int axis) const { return (kernel[axis] - 1) * dilations[axis] + 1; }
};

/// The window of a forward sliding-window op (Convolution, pooling) over spatial sizes `input`:
/// checks the attribute lengths and values, resolves auto_pad and computes the output sizes
/// (floor, or ceil with `ceil_mode` where a last window must start inside the input or the begin
/// padding). `op` names the op in messages. Fails when a window does not fit the padded input.
Result<ConvWindow> conv_window(std::string_view op, const std::vector<int64_t>& input,
                               const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                               const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                               AutoPad auto_pad, bool ceil_mode = false);

/// The window of Deconvolution over spatial sizes `input` following ONNX ConvTranspose: output
/// sizes from pads, or pads from output_shape / auto_pad. The pads of a window may be negative when
/// output_shape asks for more than the full transposed output.
Result<ConvWindow> deconv_window(const std::vector<int64_t>& input, const std::vector<int64_t>& kernel,
                                 const DeconvolutionAttrs& attrs);

/// [N, H, W, C] -> [N, C, H, W] (rank 4 only; other dims come back unchanged), and back.
Dims nhwc_to_nchw(const Dims& d);
Dims nchw_to_nhwc(const Dims& d);
/// [N, C/B, H, W, B] -> [N, C, H, W] (other ranks as they are).
Dims blocked_to_nchw(const Dims& d);
/// [N, C, H, W] -> [N, C/B, H, W, B] for C a multiple of B (other ranks as they are).
Dims nchw_to_blocked(const Dims& d, int64_t block);

/// The window of a Convolution node with input dims `x` and weight dims `w` (kernel from w unless
/// kernel_shape is set, when both must agree). With attrs.channels_last, x and w are read as NHWC.
Result<ConvWindow> convolution_window(const ConvolutionAttrs& attrs, const Dims& x, const Dims& w);
Result<ConvWindow> deconvolution_window(const DeconvolutionAttrs& attrs, const Dims& x, const Dims& w);

}  // namespace kiln
