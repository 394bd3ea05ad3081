#include "train/data/params.h"

#include "train/optim/option_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace kiln::train {

namespace {

std::string trim(std::string s, std::string_view also = "") {
  auto drop = [&](unsigned char c) { return std::isspace(c) || also.find(static_cast<char>(c)) != std::string::npos; };
  while (!s.empty() && drop(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && drop(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

std::map<std::string, std::string> params_from_options(const OptionMap& options) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : options) out[key] = value.text().value_or(value.to_string());
  return out;
}

Status ParamReader::error(std::string_view key, std::string_view problem) const {
  return invalid_argument(what_, ": key '", key, "' ", problem);
}

bool ParamReader::has(const std::string& key) {
  used_.insert(key);
  return params_.count(key) > 0;
}

Result<double> ParamReader::number(const std::string& key, std::optional<double> fallback, double lo, double hi) {
  if (!has(key)) {
    if (fallback) return *fallback;
    return error(key, "is required");
  }
  const std::string text = trim(params_.at(key));
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end != '\0' || !std::isfinite(v))
    return error(key, str_cat("is '", params_.at(key), "', not a number"));
  if (v < lo || v > hi) return error(key, str_cat("is ", text, ", out of range [", lo, ", ", hi, "]"));
  return v;
}

Result<int64_t> ParamReader::integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  if (!has(key)) {
    if (fallback) return *fallback;
    return error(key, "is required");
  }
  const std::string text = trim(params_.at(key));
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || !end || *end != '\0' || errno == ERANGE)
    return error(key, str_cat("is '", params_.at(key), "', not an integer"));
  if (v < lo || v > hi) return error(key, str_cat("is ", text, ", out of range [", lo, ", ", hi, "]"));
  return static_cast<int64_t>(v);
}

Result<bool> ParamReader::boolean(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const std::string text = trim(params_.at(key));
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return error(key, str_cat("is '", params_.at(key), "', not true or false"));
}

Result<std::vector<float>> ParamReader::numbers(const std::string& key) {
  if (!has(key)) return error(key, "is required");
  std::string text = params_.at(key);
  for (char& c : text)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(text);
  std::vector<float> out;
  for (std::string tok; in >> tok;) {
    char* end = nullptr;
    double v = std::strtod(tok.c_str(), &end);
    if (!end || *end != '\0' || !std::isfinite(v)) return error(key, str_cat("has '", tok, "', not a number"));
    out.push_back(static_cast<float>(v));
  }
  if (out.empty()) return error(key, "is an empty list");
  return out;
}

Result<std::vector<std::string>> ParamReader::strings(const std::string& key) {
  if (!has(key)) return error(key, "is required");
  std::string text = trim(params_.at(key));
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item, "\"'");
    if (item.empty()) return error(key, "has an empty item");
    out.push_back(item);
  }
  if (out.empty()) return error(key, "is an empty list");
  return out;
}

Result<std::string> ParamReader::text(const std::string& key, std::optional<std::string> fallback) {
  if (has(key)) return params_.at(key);
  if (fallback) return *fallback;
  return error(key, "is required");
}

Status ParamReader::finish() const {
  for (const auto& [key, value] : params_) {
    if (used_.count(key) == 0) {
      std::string known;
      std::vector<std::string_view> candidates;
      for (const auto& k : used_) {
        if (!known.empty()) known += ", ";
        known += k;
        candidates.push_back(k);
      }
      std::string guess = closest_match(key, candidates);
      return invalid_argument(what_, ": unknown key '", key, "' (",
                              guess.empty() ? "" : "did you mean '" + guess + "'? ", "keys: ", known, ")");
    }
  }
  return Status::ok();
}

}  // namespace kiln::train
