#include "builder/timing_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/version.h"

namespace kiln {

std::string stable_hash(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::optional<double> TimingCache::find(const std::string& key) const {
  auto it = times_.find(key);
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

Status TimingCache::load(const std::string& path, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::ok();
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("the timing cache '", path, "' is not a regular file; give a file path");
  constexpr uintmax_t kMaxBytes = uintmax_t{256} << 20;
  if (std::filesystem::file_size(path, ec) > kMaxBytes)
    return invalid_argument("the timing cache '", path, "' is larger than 256 MiB; delete it and build again");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return Status(StatusCode::kIoError, str_cat("cannot read the timing cache '", path, "'"));
  const auto json = nlohmann::json::parse(text.str(), nullptr, false);
  const auto bad = [&] {
    return invalid_argument("the timing cache '", path,
                            "' is not a kiln timing cache (malformed JSON); delete it and build again");
  };
  if (json.is_discarded() || !json.is_object() || !json.contains("times") || !json["times"].is_object() ||
      !json.value("kiln_version", nlohmann::json()).is_string() || !json.value("device", nlohmann::json()).is_string())
    return bad();
  const std::string version = json["kiln_version"], device = json["device"];
  if (version != version_string()) {
    warnings.push_back(str_cat("the timing cache '", path, "' was made by kiln ", version, ", not ", version_string(),
                               "; ignoring it (it will be rewritten)"));
    return Status::ok();
  }
  if (device != device_) {
    warnings.push_back(str_cat("the timing cache '", path, "' holds times for '", device, "', not this device ('",
                               device_, "'); ignoring it (it will be rewritten)"));
    return Status::ok();
  }
  for (const auto& [key, ms] : json["times"].items()) {
    if (!ms.is_number() || ms.get<double>() < 0) return bad();
    times_[key] = ms.get<double>();
    from_file_.insert(key);
  }
  return Status::ok();
}

Status TimingCache::save(const std::string& path) const {
  nlohmann::json times = nlohmann::json::object();
  for (const auto& [key, ms] : times_) times[key] = ms;
  const nlohmann::json json = {{"kiln_version", version_string()}, {"device", device_}, {"times", times}};
  // Written next to the target and renamed over it, so a crash never leaves half a cache.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json.dump(1) << "\n";
    if (!out) return Status(StatusCode::kIoError, str_cat("cannot write the timing cache '", path, "'"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status(StatusCode::kIoError, str_cat("cannot write the timing cache '", path, "': ", ec.message()));
  return Status::ok();
}

}  // namespace kiln
