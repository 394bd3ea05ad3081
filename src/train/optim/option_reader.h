#pragma once
// Reads typed fields out of an OptionMap for the factories; every error names the key as `where.key`.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "train/optim/options.h"

namespace kiln::train {

class OptionReader {
 public:
  /// `where` is the config section ("optim"), `what` the thing being configured ("optimizer 'adam'").
  OptionReader(const OptionMap& map, std::string where, std::string what)
      : map_(map), where_(std::move(where)), what_(std::move(what)) {}

  /// Fails on the first key not in `known` (besides "name"), listing the known keys.
  Status allow(const std::vector<std::string_view>& known) const;

  // Each reader leaves `out` alone when the key is absent.
  Status number(std::string_view key, double& out) const;
  Status integer(std::string_view key, int64_t& out) const;
  Status boolean(std::string_view key, bool& out) const;
  Status numbers(std::string_view key, std::vector<double>& out) const;
  Status integers(std::string_view key, std::vector<int64_t>& out) const;
  /// Exactly two numbers ("betas: [0.9, 0.999]").
  Status pair(std::string_view key, double& first, double& second) const;
  bool has(std::string_view key) const;

  /// "optim.betas".
  std::string key_path(std::string_view key) const;

 private:
  const OptionValue* find(std::string_view key) const;

  const OptionMap& map_;
  std::string where_;
  std::string what_;
};

/// The candidate closest to `word` by edit distance when it is close enough to be a typo, else "".
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace kiln::train
