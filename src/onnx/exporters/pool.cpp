// kiln Pooling -> ONNX MaxPool, AveragePool, LpPool and their Global variants.
#include <algorithm>

#include "onnx/exporter.h"
#include "ops/pooling/pooling.h"

namespace kiln::onnx_export {
namespace {

const char* auto_pad_name(PoolingAutoPad p) {
  switch (p) {
    case PoolingAutoPad::kNotSet: return "NOTSET";
    case PoolingAutoPad::kSameUpper: return "SAME_UPPER";
    case PoolingAutoPad::kSameLower: return "SAME_LOWER";
    case PoolingAutoPad::kValid: return "VALID";
  }
  return "NOTSET";
}

Status export_pooling(ExportContext& ctx, const Node& node) {
  const auto& a = static_cast<const PoolingAttrs&>(*node.attrs);
  if (a.channels_last)
    return unsupported("Pooling '", node.name,
                       "' is channels_last (NHWC), which ONNX pooling cannot express; export the graph before "
                       "optimizing it");
  const auto in = input_names(ctx, node);
  const auto out = output_names(ctx, node);
  const char* ops[3][2] = {
      {"MaxPool", "GlobalMaxPool"}, {"AveragePool", "GlobalAveragePool"}, {"LpPool", "GlobalLpPool"}};
  const char* op = ops[static_cast<int>(a.mode)][a.global ? 1 : 0];
  if (a.global) {
    auto& n = ctx.add_node(op, in, {out[0]}, node.name);
    if (a.mode == PoolingMode::kLp) set_attr(n, "p", a.p);
    if (a.return_indices) return unsupported("ONNX GlobalMaxPool has no Indices output");
    return Status::ok();
  }
  const bool dilated = std::any_of(a.dilations.begin(), a.dilations.end(), [](int64_t d) { return d != 1; });
  if (a.mode != PoolingMode::kMax && dilated)
    return unsupported("ONNX opset 17 ", op, " has no dilations (",
                       op == std::string("LpPool") ? "opset 18" : "opset 19", " adds them)");
  if (a.mode == PoolingMode::kLp && a.ceil_mode) return unsupported("ONNX opset 17 LpPool has no ceil_mode");
  auto& n = ctx.add_node(op, in, a.return_indices ? out : std::vector<std::string>{out[0]}, node.name);
  set_attr(n, "kernel_shape", a.kernel_shape);
  if (!a.strides.empty()) set_attr(n, "strides", a.strides);
  if (a.auto_pad == PoolingAutoPad::kNotSet && !a.pads.empty()) set_attr(n, "pads", a.pads);
  if (a.auto_pad != PoolingAutoPad::kNotSet) set_attr(n, "auto_pad", std::string(auto_pad_name(a.auto_pad)));
  if (a.mode == PoolingMode::kMax && !a.dilations.empty()) set_attr(n, "dilations", a.dilations);
  if (a.mode != PoolingMode::kLp && a.ceil_mode) set_attr(n, "ceil_mode", int64_t{1});
  if (a.mode == PoolingMode::kAverage && a.count_include_pad) set_attr(n, "count_include_pad", int64_t{1});
  if (a.mode == PoolingMode::kLp) set_attr(n, "p", a.p);
  return Status::ok();
}

KILN_REGISTER_ONNX_EXPORTER("Pooling", export_pooling);

}  // namespace
}  // namespace kiln::onnx_export
