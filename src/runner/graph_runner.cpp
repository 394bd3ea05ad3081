#include "runner/graph_runner.h"

namespace kiln {

Result<GraphRunner> GraphRunner::compile(const Graph& graph, const BuildOptions& options, BuildReport* report) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, build_engine(graph, options, report));
  GraphRunner runner;
  auto storage = std::make_shared<const std::string>(std::move(bytes));
  KILN_ASSIGN_OR_RETURN(runner.engine_, EngineImpl::deserialize(*storage, storage));
  KILN_ASSIGN_OR_RETURN(runner.context_, runner.engine_->create_execution_context());
  return runner;
}

Result<GraphRunner> GraphRunner::compile_reference(const Graph& graph) {
  BuildOptions options;
  options.backend = Backend::kRef;
  options.optimization_level = 0;
  options.passes.enabled = false;
  return compile(graph, options);
}

}  // namespace kiln
