#pragma once
// Typed reading of a config's key/value map (an augmentation's or a dataset's): remembers the keys read so
// that finish() can name a key nobody asked for, and names the key in every error.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "train/optim/options.h"

namespace kiln::train {

/// A config's typed values (optim/options.h, what the config reader gives every factory) as the strings the
/// data factories read: strings as they are, numbers and lists as written ("28", "[0.5, 0.5]").
std::map<std::string, std::string> params_from_options(const OptionMap& options);

class ParamReader {
 public:
  /// `what` starts every error: "augmentation 'hflip'", "dataset (type idx)".
  ParamReader(std::string what, const std::map<std::string, std::string>& params)
      : what_(std::move(what)), params_(params) {}

  Status error(std::string_view key, std::string_view problem) const;
  /// True when `key` is given (and marks it as read).
  bool has(const std::string& key);
  Result<double> number(const std::string& key, std::optional<double> fallback, double lo, double hi);
  Result<int64_t> integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo, int64_t hi);
  Result<bool> boolean(const std::string& key, bool fallback);
  /// "[0.5, 0.5]", "0.5,0.5", "0.5 0.5" or "0.5".
  Result<std::vector<float>> numbers(const std::string& key);
  /// "[a, b]" or "a,b": items trimmed, brackets and quotes dropped.
  Result<std::vector<std::string>> strings(const std::string& key);
  /// The value as written; `fallback` when absent (nullopt: the key is required).
  Result<std::string> text(const std::string& key, std::optional<std::string> fallback);
  /// Fails on a key that was never read, listing the keys that are.
  Status finish() const;

 private:
  std::string what_;
  const std::map<std::string, std::string>& params_;
  std::set<std::string> used_;
};

}  // namespace kiln::train
