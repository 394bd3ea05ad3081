#pragma once
// Per-layer times gathered over profiled runs of `kiln exec` (--dumpProfile, --exportProfile).
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::cli {

class LayerProfile {
 public:
  /// One layer's time in the current run; layers keep the order they first ran in.
  void add(std::string_view layer, std::string_view kernel, double ms);
  void end_run() { ++runs_; }
  int runs() const { return runs_; }
  /// trtexec's table: total and average time per layer, share of the total, the layer and its kernel.
  std::string table() const;
  /// trtexec's --exportProfile JSON: [{"count": runs}, {"name", "timeMs", "averageMs", "medianMs", "minMs",
  /// "percentage", "kernel"}...].
  std::string json() const;

 private:
  struct Layer {
    std::string name, kernel;
    double total_ms = 0;
    std::vector<double> samples;  ///< one time per run
  };
  double total_ms() const;
  std::vector<Layer> layers_;
  std::unordered_map<std::string, size_t> index_;
  int runs_ = 0;
};

}  // namespace kiln::cli
