#pragma once
// The timing cache: measured kernel times, keyed by a hash of the problem (op, attributes, types and
// shapes), the kernel, its tactic and the device, kept in a file so that a rebuild times nothing twice.
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/status.h"

namespace kiln {

class TimingCache {
 public:
  /// `device` names the machine the times hold for (a cache made on another is not used).
  explicit TimingCache(std::string device) : device_(std::move(device)) {}
  /// Reads the cache file at `path`: a missing file is an empty cache; one from another kiln version or
  /// device is ignored with a warning in `warnings`; a malformed one is an error naming the file.
  Status load(const std::string& path, std::vector<std::string>& warnings);
  Status save(const std::string& path) const;

  std::optional<double> find(const std::string& key) const;
  void put(const std::string& key, double ms) { times_[key] = ms; }
  size_t size() const { return times_.size(); }
  const std::string& device() const { return device_; }
  /// Notes that a time read from the file was used (times measured in this build do not count).
  void note_read(const std::string& key) {
    if (from_file_.count(key)) read_.insert(key);
  }
  /// How many of the file's times were used.
  int reads() const { return static_cast<int>(read_.size()); }

 private:
  std::string device_;
  std::unordered_map<std::string, double> times_;
  std::unordered_set<std::string> from_file_, read_;
};

/// A stable 64-bit hash (FNV-1a) of `text`, as 16 hex digits.
std::string stable_hash(std::string_view text);

}  // namespace kiln
