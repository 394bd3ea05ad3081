#include "ops/strings/strings.h"

#include <sstream>

#include "ops/registry.h"

namespace kiln {

const char* enum_name(CaseChange c) {
  switch (c) {
    case CaseChange::kNone: return "NONE";
    case CaseChange::kLower: return "LOWER";
    case CaseChange::kUpper: return "UPPER";
  }
  return "?";
}

std::vector<std::string> StringNormalizerAttrs::stopword_list() const {
  std::vector<std::string> out;
  if (stopwords.empty()) return out;
  std::stringstream words(stopwords);
  for (std::string w; std::getline(words, w, '\n');) out.push_back(w);
  return out;
}

namespace {

using Descs = std::vector<TensorDesc>;

OpSchema string_normalizer_schema() {
  OpSchema s = make_schema<StringNormalizerAttrs>(
      "StringNormalizer", "strings",
      "removes stop words and changes the case of a string tensor [C] or [1, C] (ONNX StringNormalizer)");
  s.input_names = {"X"};
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_dtype(ctx, 0, {DataType::kString}));
    const Dims& d = ctx.input(0).dims;
    if (d.rank() == 1) return one_output(DataType::kString, {kDynamicDim});
    if (d.rank() == 2 && (d[0] == 1 || d[0] == kDynamicDim)) return one_output(DataType::kString, {1, kDynamicDim});
    return invalid_argument("StringNormalizer takes a string tensor of shape [C] or [1, C], got ", d.to_string());
  };
  return s;
}

OpSchema string_cast_schema() {
  OpSchema s = make_schema<StringCastAttrs>(
      "StringCast", "strings",
      "casts numbers to their shortest round-trip decimal text, or parses text as numbers (ONNX Cast with strings)");
  s.input_names = {"input"};
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    const auto& a = ctx.attrs_as<StringCastAttrs>();
    const DataType from = ctx.input(0).dtype;
    if ((from == DataType::kString) == (a.to == DataType::kString))
      return invalid_argument("StringCast casts to or from string, not ", dtype_name(from), " to ", dtype_name(a.to));
    if (a.to == DataType::kFp8E4M3 || from == DataType::kFp8E4M3)
      return unsupported("StringCast does not take fp8e4m3");
    return one_output(a.to, ctx.input(0).dims);
  };
  return s;
}

}  // namespace

KILN_REGISTER_OP(string_normalizer_schema());
KILN_REGISTER_OP(string_cast_schema());

}  // namespace kiln
