#pragma once
// A pass: a named graph rewrite the pass manager runs, logs and can switch off by name. Passes report
// what they changed ("fused 'conv1' + 'relu1'") and, for fusions, what they refused and why.
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

/// The builder's hook: OK when the target backend has a kernel other than the reference one for `node`
/// (a fusion is only made where it can run fast), else the reason.
using BackendHook = std::function<Status(const Node& node)>;

class PassContext {
 public:
  PassContext(Graph& graph, BackendHook backend, std::string pass)
      : graph_(graph), backend_(std::move(backend)), pass_(std::move(pass)) {}

  Graph& graph() { return graph_; }
  /// Whether the target backend runs `node` (always OK without a hook).
  Status backend_accepts(const Node& node) const { return backend_ ? backend_(node) : Status::ok(); }
  /// Records a change (logged at INFO with the pass's name).
  void applied(std::string what);
  /// Records a rewrite the pass considered and did not make, with the reason (logged at verbose).
  void refused(std::string what);
  const std::vector<std::string>& changes() const { return applied_; }
  const std::vector<std::string>& refusals() const { return refused_; }

 private:
  Graph& graph_;
  BackendHook backend_;
  std::string pass_;
  std::vector<std::string> applied_, refused_;
};

struct Pass {
  std::string name;     ///< "conv-activation": what --disable-pass takes
  std::string summary;  ///< one line for --help and docs
  std::function<Status(PassContext&)> run;
};

}  // namespace kiln
