// ONNX StringNormalizer -> kiln StringNormalizer (a host op).
#include "ops/strings/strings.h"
#include "onnx/importer.h"

namespace kiln::onnx_import {
namespace {

Result<StringNormalizerAttrs> normalizer_attrs(const OnnxNode& node) {
  StringNormalizerAttrs a;
  const std::string action = node.attr_string("case_change_action", "NONE");
  if (action == "LOWER")
    a.case_change_action = CaseChange::kLower;
  else if (action == "UPPER")
    a.case_change_action = CaseChange::kUpper;
  else if (action != "NONE")
    return node.error("case_change_action '", action, "' is not NONE, LOWER or UPPER");
  a.is_case_sensitive = node.attr_int("is_case_sensitive", 0) != 0;
  a.locale = node.attr_string("locale", "");
  if (!a.locale.empty() && a.locale != "en_US" && a.locale != "C" && a.locale != "en_US.UTF-8")
    return node.unsupported_error("locale '", a.locale, "': kiln changes case for ASCII letters only (en_US)");
  std::vector<std::string> words;
  if (node.has_attr("stopwords")) {
    KILN_ASSIGN_OR_RETURN(words, node.attr_strings("stopwords"));
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].find('\n') != std::string::npos) return node.unsupported_error("a stop word holds a newline");
    if (i > 0) a.stopwords += '\n';
    a.stopwords += words[i];
  }
  return a;
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "StringNormalizer",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(StringNormalizerAttrs a, normalizer_attrs(node));
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      if (!x) return node.error("StringNormalizer needs its input X");
      return ctx.add(node, "StringNormalizer", a, {x}).status();
    },
    .check = [](const OnnxNode& node) -> Status { return normalizer_attrs(node).status(); },
});

}  // namespace
}  // namespace kiln::onnx_import
