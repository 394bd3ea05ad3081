#pragma once
// The builder: graph -> serialized engine. It picks, per node, the implementation that will run it
// (the first accepting one on the target backend, the reference kernel as the stated fallback).
// Passes and tactic timing plug in here.
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/registry.h"
#include "kiln/network.h"

namespace kiln {

struct BuildOptions {
  Backend backend = Backend::kCpu;
  /// Run nodes the backend rejects on the reference kernels instead of failing (logged as a warning).
  bool reference_fallback = true;
  // From the public BuilderConfig (include/kiln/builder.h), for tactic timing and memory planning;
  // this builder does not read them yet.
  uint64_t workspace_limit = 0;   ///< bytes of scratch memory one layer may use; 0: no limit
  int optimization_level = 3;     ///< 0: the first accepted tactic ... 5: time the most tactics
  std::string timing_cache_path;  ///< a timing cache file to read and update; empty: none
  int threads = 0;                ///< threads the build may use; 0: one per core
};

struct BuildReport {
  /// One line per node: "conv1 (Convolution): cpu.onednn.convolution".
  std::vector<std::string> choices;
  std::vector<std::string> warnings;
};

/// Builds a serialized engine; errors list every node no implementation accepts, with the reasons.
Result<std::string> build_engine(const Graph& graph, const BuildOptions& options, BuildReport* report = nullptr);
/// The same for a network made with the network definition API.
Result<std::string> build_engine(const Network& network, const BuildOptions& options, BuildReport* report = nullptr);

}  // namespace kiln
