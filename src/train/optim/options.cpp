#include "train/optim/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "train/optim/option_reader.h"

namespace kiln::train {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The shortest form that reads back as the same double ("0.9", not "0.90000000000000002").
std::string format_number(double v) {
  std::string text;
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    text = os.str();
    if (parse_number(text) == v) break;
  }
  return text;
}

}  // namespace

std::optional<double> OptionValue::number() const {
  if (const auto* d = std::get_if<double>(&v_)) return *d;
  if (const auto* s = std::get_if<std::string>(&v_)) return parse_number(*s);
  return std::nullopt;
}

std::optional<bool> OptionValue::boolean() const {
  if (const auto* b = std::get_if<bool>(&v_)) return *b;
  if (const auto* s = std::get_if<std::string>(&v_)) {
    std::string_view t = trim(*s);
    if (t == "true") return true;
    if (t == "false") return false;
  }
  return std::nullopt;
}

std::optional<std::string> OptionValue::text() const {
  if (const auto* s = std::get_if<std::string>(&v_)) return *s;
  return std::nullopt;
}

std::optional<std::vector<double>> OptionValue::list() const {
  if (const auto* l = std::get_if<std::vector<double>>(&v_)) return *l;
  if (const auto* d = std::get_if<double>(&v_)) return std::vector<double>{*d};
  if (const auto* s = std::get_if<std::string>(&v_)) {
    std::string_view t = trim(*s);
    if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = trim(t.substr(1, t.size() - 2));
    std::vector<double> out;
    if (t.empty()) return out;
    while (true) {
      size_t comma = t.find(',');
      auto v = parse_number(t.substr(0, comma));
      if (!v) return std::nullopt;
      out.push_back(*v);
      if (comma == std::string_view::npos) break;
      t.remove_prefix(comma + 1);
    }
    return out;
  }
  return std::nullopt;
}

std::string OptionValue::to_string() const {
  if (const auto* d = std::get_if<double>(&v_)) return format_number(*d);
  if (const auto* b = std::get_if<bool>(&v_)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v_)) return "'" + *s + "'";
  const auto& l = std::get<std::vector<double>>(v_);
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + format_number(l[i]);
  return out + "]";
}

std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(1, word.size() / 4) + 1;  // a typo: one edit per four letters
  for (std::string_view c : candidates) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (word[i - 1] == c[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    if (row[c.size()] < best_distance) {
      best_distance = row[c.size()];
      best = c;
    }
  }
  return std::string(best);
}

std::string OptionReader::key_path(std::string_view key) const {
  return where_.empty() ? std::string(key) : str_cat(where_, ".", key);
}

const OptionValue* OptionReader::find(std::string_view key) const {
  auto it = map_.find(std::string(key));
  return it == map_.end() ? nullptr : &it->second;
}

bool OptionReader::has(std::string_view key) const { return find(key) != nullptr; }

Status OptionReader::allow(const std::vector<std::string_view>& known) const {
  for (const auto& [key, value] : map_) {
    if (key == "name" || std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    std::string hint = closest_match(key, known);
    return invalid_argument(key_path(key), ": unknown key for ", what_, hint.empty() ? "" : "; did you mean '", hint,
                            hint.empty() ? "" : "'?", " (known keys: ", list, ")");
  }
  return Status::ok();
}

Status OptionReader::number(std::string_view key, double& out) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto n = v->number();
  if (!n || !std::isfinite(*n)) return invalid_argument(key_path(key), ": expected a number, got ", v->to_string());
  out = *n;
  return Status::ok();
}

Status OptionReader::integer(std::string_view key, int64_t& out) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto n = v->number();
  if (!n || !std::isfinite(*n) || std::trunc(*n) != *n || std::abs(*n) > 9.0e15)
    return invalid_argument(key_path(key), ": expected a whole number, got ", v->to_string());
  out = static_cast<int64_t>(*n);
  return Status::ok();
}

Status OptionReader::boolean(std::string_view key, bool& out) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto b = v->boolean();
  if (!b) return invalid_argument(key_path(key), ": expected true or false, got ", v->to_string());
  out = *b;
  return Status::ok();
}

Status OptionReader::numbers(std::string_view key, std::vector<double>& out) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto l = v->list();
  bool finite = l && std::all_of(l->begin(), l->end(), [](double x) { return std::isfinite(x); });
  if (!finite) return invalid_argument(key_path(key), ": expected a list of numbers, got ", v->to_string());
  out = *l;
  return Status::ok();
}

Status OptionReader::integers(std::string_view key, std::vector<int64_t>& out) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto l = v->list();
  bool whole = l && std::all_of(l->begin(), l->end(), [](double x) {
                 return std::isfinite(x) && std::trunc(x) == x && std::abs(x) <= 9.0e15;
               });
  if (!whole) return invalid_argument(key_path(key), ": expected a list of whole numbers, got ", v->to_string());
  out.assign(l->begin(), l->end());
  return Status::ok();
}

Status OptionReader::pair(std::string_view key, double& first, double& second) const {
  const OptionValue* v = find(key);
  if (!v) return Status::ok();
  auto l = v->list();
  if (!l || l->size() != 2 || !std::isfinite((*l)[0]) || !std::isfinite((*l)[1]))
    return invalid_argument(key_path(key), ": expected a list of two numbers, got ", v->to_string());
  first = (*l)[0];
  second = (*l)[1];
  return Status::ok();
}

}  // namespace kiln::train
