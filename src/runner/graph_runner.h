#pragma once
// A graph compiled by the builder and run by the runtime: how training runs its steps, how the op harness,
// the op unit tests and `kiln doctor` run ops — the same plan, kernels and memory planner as inference.
#include <memory>
#include <string>

#include "builder/builder.h"
#include "graph/graph.h"
#include "runtime/engine.h"

namespace kiln {

class GraphRunner {
 public:
  /// Builds `graph` for `options.backend` (optimizer, tactics, pins and fallbacks as `options` say).
  static Result<GraphRunner> compile(const Graph& graph, const BuildOptions& options, BuildReport* report = nullptr);
  /// The reference backend, no optimizer, no timing: the oracle for tests.
  static Result<GraphRunner> compile_reference(const Graph& graph);

  /// Binds an input by address (keep `value` alive and unchanged until run() returns).
  Status set_input(const std::string& name, Tensor value) { return context_->set_input(name, std::move(value)); }
  /// Binds a caller's tensor that runs write output `name` into (ContextImpl::set_output).
  Status set_output(const std::string& name, Tensor value) { return context_->set_output(name, std::move(value)); }
  /// Runs the engine; outputs are host tensors when it returns.
  Status run() { return context_->execute(); }
  Result<Tensor> output(const std::string& name) const { return context_->output(name); }
  const EngineImpl& engine() const { return *engine_; }
  ContextImpl& context() { return *context_; }

 private:
  std::shared_ptr<const EngineImpl> engine_;
  std::unique_ptr<ContextImpl> context_;
};

}  // namespace kiln
