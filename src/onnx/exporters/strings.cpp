// kiln StringNormalizer, StringCast -> ONNX StringNormalizer, Cast.
#include "ops/strings/strings.h"
#include "onnx/exporter.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_export {
namespace {

KILN_REGISTER_ONNX_EXPORTER("StringNormalizer", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const StringNormalizerAttrs&>(*node.attrs);
  auto& n = ctx.add_node("StringNormalizer", input_names(ctx, node), output_names(ctx, node), node.name);
  set_attr(n, "case_change_action", std::string(enum_name(a.case_change_action)));
  set_attr(n, "is_case_sensitive", static_cast<int64_t>(a.is_case_sensitive));
  if (!a.locale.empty()) set_attr(n, "locale", a.locale);
  if (const auto words = a.stopword_list(); !words.empty()) set_attr(n, "stopwords", words);
  return Status::ok();
});

KILN_REGISTER_ONNX_EXPORTER("StringCast", [](ExportContext& ctx, const Node& node) -> Status {
  const auto& a = static_cast<const StringCastAttrs&>(*node.attrs);
  auto& n = ctx.add_node("Cast", input_names(ctx, node), output_names(ctx, node), node.name);
  set_attr(n, "to", static_cast<int64_t>(onnx_import::to_onnx_dtype(a.to)));
  return Status::ok();
});

}  // namespace
}  // namespace kiln::onnx_export
