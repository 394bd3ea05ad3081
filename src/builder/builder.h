#pragma once
// The builder: graph -> serialized engine. It picks, per node, the implementation that will run it
// and tactic (timed among every accepting one, or the first at optimization level 0; the reference kernel
// is the stated fallback). Passes plug in here.
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/registry.h"
#include "kiln/network.h"
#include "passes/pass_manager.h"

namespace kiln {

/// A kernel chosen by the caller for one node: an implementation by name and one of its tactics ("": its default).
struct KernelPin {
  std::string impl;
  std::string tactic;
};

struct BuildOptions {
  Backend backend = Backend::kCpu;
  /// Run nodes the backend rejects on the reference kernels instead of failing (logged as a warning).
  bool reference_fallback = true;
  /// 0: the first accepting kernel per node; 1-5: time every accepting kernel and tactic, longer at higher levels.
  int optimization_level = 3;
  /// A timing cache file read before and written after timing (empty: none).
  std::string timing_cache_path;
  /// Bytes of scratch memory one layer may use (0: no limit); kernels needing more are not chosen (checked
  /// on the candidates the builder runs: problems with static shapes).
  uint64_t workspace_limit = 0;
  /// CPU threads for timing and running (0: leave the process setting as it is).
  int threads = 0;
  /// The graph optimizer (src/passes): on by default; passes can be switched off by name, the graph dumped.
  /// Its backend hook is set by the builder.
  PassOptions passes;
  /// Entries added to the engine header's `extra` map (the public API's optimization profiles, verbosity).
  std::map<std::string, std::string> header_extra;
  /// Kernels pinned by node name (as the node is named after the passes): the node runs on that implementation
  /// and tactic, untimed and with no fallback; the build fails when the implementation rejects the node.
  std::map<std::string, KernelPin> pinned;
};

struct BuildReport {
  /// One line per node: "conv1 (Convolution): cpu.onednn.convolution".
  std::vector<std::string> choices;
  std::vector<std::string> warnings;
  int timed = 0, cached = 0;  ///< candidates measured, and read from the timing cache
  /// Nodes of a CUDA build that no CUDA kernel accepts: they run on a CPU (or reference) kernel on the host,
  /// their inputs copied down and outputs up (each named in a warning).
  int host_fallbacks = 0;
  double timing_ms = 0;    ///< time spent measuring candidates
  double layers_ms = 0;    ///< the sum of the chosen kernels' timings (the layers timed)
  int untimed_layers = 0;  ///< layers whose kernel was chosen without a timing (level 0, dynamic shapes, ...)
  /// How the CPU builder chose between layouts (both planned, the faster kept), or empty.
  std::string layout;
  OptimizerReport optimizer;  ///< what the passes changed and refused
  /// Constants the engine stores only as the prepared data of the steps that read them (weights only packed
  /// kernels read), and their bytes left out of its weights section.
  int prepared_only_constants = 0;
  uint64_t prepared_only_bytes = 0;
};

/// The kernel call of a graph node: its schema, attributes, input and output descriptions and constants.
OpCall node_call(const Node& node);

/// The optimizer's backend hook for `backend`: OK when a kernel of that backend (not the reference fallback)
/// accepts the node, or the node runs on the host.
BackendHook backend_hook(Backend backend);

/// Builds a serialized engine from an optimized copy of `graph` (the passes of options.passes); errors list every node
/// no implementation accepts, with the reasons. Kernel choices and timings are logged at the verbose level.
Result<std::string> build_engine(const Graph& graph, const BuildOptions& options, BuildReport* report = nullptr);
/// The same, consuming `graph`: no copy is made, and its constants are released as the engine is written (the
/// lower peak memory of a build from a model that is not needed afterwards).
Result<std::string> build_engine(std::unique_ptr<Graph> graph, const BuildOptions& options,
                                 BuildReport* report = nullptr);
/// The engine in 64-byte aligned memory (uint8), which EngineImpl::deserialize uses in place: the weights are not
/// copied again, as they are when a std::string result moves into aligned memory. Takes the graph as above.
Result<Tensor> build_engine_aligned(std::unique_ptr<Graph> graph, const BuildOptions& options,
                                    BuildReport* report = nullptr);
/// The same for a network made with the network definition API.
Result<std::string> build_engine(const Network& network, const BuildOptions& options, BuildReport* report = nullptr);

}  // namespace kiln
