// kiln Convolution and Deconvolution -> ONNX Conv and ConvTranspose.
#include "onnx/exporter.h"
#include "ops/convolution/convolution.h"

namespace kiln::onnx_export {
namespace {

const char* auto_pad_name(AutoPad p) {
  switch (p) {
    case AutoPad::kNotSet: return "NOTSET";
    case AutoPad::kSameUpper: return "SAME_UPPER";
    case AutoPad::kSameLower: return "SAME_LOWER";
    case AutoPad::kValid: return "VALID";
  }
  return "NOTSET";
}

void set_if(onnx::NodeProto& n, const char* name, const std::vector<int64_t>& v) {
  if (!v.empty()) set_attr(n, name, v);
}

KILN_REGISTER_ONNX_EXPORTER("Convolution", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const ConvolutionAttrs&>(*node.attrs);
  const bool residual = node.inputs.size() > 3 && node.inputs[3];
  if (has_conv_epilogue(a, residual))
    return unsupported("Convolution '", node.name, "' has an epilogue (",
                       residual && a.fused.on ? "a residual input and a fused activation"
                       : residual             ? "a residual input"
                                              : "a fused activation",
                       ") that ONNX Conv cannot express; export the graph before optimizing it");
  if (a.channels_last || a.channel_block > 0)
    return unsupported(
        "Convolution '", node.name, "' is ",
        a.channels_last ? "channels_last (NHWC)" : str_cat("in blocks of ", a.channel_block, " channels"),
        ", which ONNX Conv cannot express; export the graph before optimizing it");
  auto& n = ctx.add_node("Conv", input_names(ctx, node), output_names(ctx, node), node.name);
  set_if(n, "kernel_shape", a.kernel_shape);
  set_if(n, "strides", a.strides);
  if (a.auto_pad == AutoPad::kNotSet) set_if(n, "pads", a.pads);
  set_if(n, "dilations", a.dilations);
  set_attr(n, "group", a.group);
  if (a.auto_pad != AutoPad::kNotSet) set_attr(n, "auto_pad", std::string(auto_pad_name(a.auto_pad)));
  return Status::ok();
});

KILN_REGISTER_ONNX_EXPORTER("Deconvolution", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const DeconvolutionAttrs&>(*node.attrs);
  auto& n = ctx.add_node("ConvTranspose", input_names(ctx, node), output_names(ctx, node), node.name);
  set_if(n, "kernel_shape", a.kernel_shape);
  set_if(n, "strides", a.strides);
  if (a.auto_pad == AutoPad::kNotSet) set_if(n, "pads", a.pads);
  set_if(n, "dilations", a.dilations);
  set_if(n, "output_padding", a.output_padding);
  set_if(n, "output_shape", a.output_shape);
  set_attr(n, "group", a.group);
  if (a.auto_pad != AutoPad::kNotSet) set_attr(n, "auto_pad", std::string(auto_pad_name(a.auto_pad)));
  return Status::ok();
});

}  // namespace
}  // namespace kiln::onnx_export
