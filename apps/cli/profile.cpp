#include "profile.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace kiln::cli {

void LayerProfile::add(std::string_view layer, std::string_view kernel, double ms) {
  auto [it, fresh] = index_.try_emplace(std::string(layer), layers_.size());
  if (fresh) layers_.push_back({std::string(layer), std::string(kernel), 0, {}});
  layers_[it->second].total_ms += ms;
  layers_[it->second].samples.push_back(ms);
}

namespace {
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}
double min_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
}  // namespace

double LayerProfile::total_ms() const {
  double t = 0;
  for (const Layer& l : layers_) t += l.total_ms;
  return t;
}

std::string LayerProfile::table() const {
  const double total = total_ms(), runs = runs_ > 0 ? runs_ : 1;
  std::string out = "=== Profile (" + std::to_string(runs_) + " iterations ) ===\n";
  char line[512];
  std::snprintf(line, sizeof line, "%12s %12s %9s   %s\n", "Time(ms)", "Avg.(ms)", "Time(%)", "Layer");
  out += line;
  for (const Layer& l : layers_) {
    std::snprintf(line, sizeof line, "%12.2f %12.4f %9.1f   %s [%s]\n", l.total_ms, l.total_ms / runs,
                  total > 0 ? 100 * l.total_ms / total : 0.0, l.name.c_str(), l.kernel.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "%12.2f %12.4f %9.1f   Total\n", total, total / runs, 100.0);
  return out + line;
}

std::string LayerProfile::json() const {
  const double total = total_ms(), runs = runs_ > 0 ? runs_ : 1;
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"count", runs_}});
  for (const Layer& l : layers_)
    out.push_back({{"name", l.name},
                   {"kernel", l.kernel},
                   {"timeMs", l.total_ms},
                   {"averageMs", l.total_ms / runs},
                   {"medianMs", median_of(l.samples)},
                   {"minMs", min_of(l.samples)},
                   {"percentage", total > 0 ? 100 * l.total_ms / total : 0.0}});
  return out.dump(1) + "\n";
}

}  // namespace kiln::cli
