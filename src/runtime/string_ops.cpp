#include "runtime/string_ops.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/strings.h"

namespace kiln {
namespace {

std::string with_case(std::string_view s, CaseChange c) {
  std::string out(s);
  for (char& ch : out) {
    const auto u = static_cast<unsigned char>(ch);
    if (c == CaseChange::kLower) ch = static_cast<char>(std::tolower(u));
    if (c == CaseChange::kUpper) ch = static_cast<char>(std::toupper(u));
  }
  return out;
}

std::string number_text(double v, DataType from) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  std::to_chars_result r{};
  if (is_floating(from))
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));  // the shortest text that reads back
  else
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(v));
  return std::string(buf, r.ptr);
}

Result<int64_t> parse_integer(const std::string& s) {
  int64_t v = 0;
  const char* first = s.c_str() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, s.c_str() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.c_str() + s.size())
    return invalid_argument("StringCast: '", s.substr(0, 64), "' is not an integer that fits int64");
  return v;
}

Result<double> parse_number(std::string_view text, DataType to) {
  const std::string s(text);
  if (s.empty()) return invalid_argument("StringCast: an empty string is not a number");
  if (is_floating(to)) {
    if (s == "INF" || s == "+INF" || s == "inf" || s == "+inf") return HUGE_VAL;
    if (s == "-INF" || s == "-inf") return -HUGE_VAL;
    if (s == "NaN" || s == "nan" || s == "NAN") return std::nan("");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0])))
      return invalid_argument("StringCast: '", s.substr(0, 64), "' is not a number");
    return v;
  }
  KILN_ASSIGN_OR_RETURN(int64_t v, parse_integer(s));
  return static_cast<double>(v);
}

}  // namespace

Result<Tensor> normalize_strings(const Tensor& x, const StringNormalizerAttrs& a) {
  if (x.dtype() != DataType::kString) return invalid_argument("StringNormalizer takes strings");
  const bool row = x.rank() == 2;
  if (!(x.rank() == 1 || (row && x.dims()[0] == 1)))
    return invalid_argument("StringNormalizer takes [C] or [1, C], got ", x.dims().to_string());
  KILN_ASSIGN_OR_RETURN(Tensor c, x.contiguous());
  std::unordered_set<std::string> stop;
  for (const std::string& w : a.stopword_list())
    stop.insert(a.is_case_sensitive ? w : with_case(w, CaseChange::kLower));
  std::vector<std::string> kept;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const std::string_view s = string_at(c, i);
    if (stop.count(a.is_case_sensitive ? std::string(s) : with_case(s, CaseChange::kLower))) continue;
    kept.push_back(with_case(s, a.case_change_action));
  }
  if (kept.empty()) kept.emplace_back();  // ONNX: an all-removed input gives one empty string
  const auto n = static_cast<int64_t>(kept.size());
  return string_tensor(row ? Dims{1, n} : Dims{n}, kept);
}

Result<Tensor> cast_strings(const Tensor& x, DataType to) {
  KILN_ASSIGN_OR_RETURN(Tensor c, x.contiguous());
  if (c.dtype() == DataType::kString) {
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(to, c.dims()));
    for (int64_t i = 0; i < c.numel(); ++i) {
      if (to == DataType::kInt64) {  // exact: no trip through double
        KILN_ASSIGN_OR_RETURN(out.data<int64_t>()[i], parse_integer(std::string(string_at(c, i))));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(double v, parse_number(string_at(c, i), to));
      out.set(i, v);
    }
    return out;
  }
  std::vector<std::string> texts;
  texts.reserve(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    texts.push_back(c.dtype() == DataType::kInt64 ? std::to_string(c.data<int64_t>()[i])
                                                  : number_text(c.at(i), c.dtype()));
  return string_tensor(c.dims(), texts);
}

}  // namespace kiln
