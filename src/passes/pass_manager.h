#pragma once
// The pass manager: runs the optimizer's passes in order on a graph, each logged at INFO with what it
// changed, switchable off by name, the graph dumpable before and after each pass that changed it.
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace kiln {

struct PassOptions {
  bool enabled = true;             ///< false: no pass runs
  std::set<std::string> disabled;  ///< pass names to skip (unknown names are an error listing the known ones)
  /// A folder to write the graph to: "00-input.txt", then "NN-<pass>.txt" after each pass that changed it.
  std::string dump_dir;
  BackendHook backend;         ///< see BackendHook; empty: every fusion is assumed to run
  PrecisionOptions precision;  ///< for the precision pass
  LayoutOptions layout;        ///< for layout-nhwc
};

struct PassRecord {
  std::string pass;
  int changes = 0;
  double ms = 0;
  size_t nodes_after = 0;
};

struct OptimizerReport {
  size_t nodes_before = 0, nodes_after = 0;
  std::vector<PassRecord> passes;
  std::vector<std::string> applied;  ///< "conv-activation: fused 'conv1' + 'relu1'"
  std::vector<std::string> refused;  ///< "conv-activation: 'conv2' + 'sig2': no CPU kernel ..."
};

/// Every pass in the order the optimizer runs them.
const std::vector<Pass>& optimizer_passes();
/// Runs the enabled passes on `graph`; the graph is verified after each pass that changed it (a failure
/// names the pass). Errors: an unknown name in `disabled`, a dump folder that cannot be written.
Status run_passes(Graph& graph, const PassOptions& options, OptimizerReport* report = nullptr);

}  // namespace kiln
