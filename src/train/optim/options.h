#pragma once
// Config values for the optimizer and learning-rate policy factories: the `optim:` and `lr_policy:` maps
// of a training config, or `key=value` overrides from a command line (strings that convert on use).
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::train {

/// One config value: a number, a bool, a string or a list of numbers. A string converts when a number,
/// a bool or a list is asked for ("0.01", "true", "[0.9, 0.999]"), so command-line overrides work as-is.
class OptionValue {
 public:
  OptionValue(double v) : v_(v) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) OptionValue(T v) : v_(static_cast<double>(v)) {}
  OptionValue(bool v) : v_(v) {}
  OptionValue(std::string v) : v_(std::move(v)) {}
  OptionValue(const char* v) : v_(std::string(v)) {}
  OptionValue(std::vector<double> v) : v_(std::move(v)) {}
  OptionValue(std::initializer_list<double> v) : v_(std::vector<double>(v)) {}

  std::optional<double> number() const;
  std::optional<bool> boolean() const;
  /// The string of a string value (no conversion from the other kinds).
  std::optional<std::string> text() const;
  /// A list, or a single number as a list of one.
  std::optional<std::vector<double>> list() const;
  /// The value as written in a config ("0.001", "true", "[0.9, 0.999]", or the string itself).
  std::string to_string() const;

 private:
  std::variant<double, bool, std::string, std::vector<double>> v_;
};

using OptionMap = std::map<std::string, OptionValue>;

}  // namespace kiln::train
