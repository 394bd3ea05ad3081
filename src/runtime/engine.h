#pragma once
// The runtime: a deserialized engine and the execution contexts that run it.
// One engine, many contexts (one per thread or stream); a context owns its kernel instances.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/engine_format.h"
#include "graph/graph.h"
#include "kernels/registry.h"

namespace kiln {

class ExecutionContext;

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  /// Reads a serialized engine; a corrupt file, another format version or a kernel this kiln lacks
  /// is an error that says to rebuild the engine.
  static Result<std::shared_ptr<const Engine>> deserialize(std::string_view bytes);

  const Graph& graph() const { return *graph_; }
  const EngineHeader& header() const { return header_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// One line per node: name, op, kernel.
  std::string inspect() const;
  Result<std::unique_ptr<ExecutionContext>> create_execution_context() const;

  struct Step {
    Node* node;
    const KernelImpl* impl;
  };
  const std::vector<Step>& steps() const { return steps_; }

 private:
  EngineHeader header_;
  std::unique_ptr<Graph> graph_;
  std::vector<Step> steps_;
};

class ExecutionContext {
 public:
  explicit ExecutionContext(std::shared_ptr<const Engine> engine);
  /// Binds a host tensor to a graph input; dtype and rank must match, static dims must agree.
  Status set_input(const std::string& name, const Tensor& value);
  /// Runs every node; output shapes follow the inputs' actual shapes.
  Status execute(Stream& stream = cpu_stream());
  Result<Tensor> output(const std::string& name) const;

 private:
  std::shared_ptr<const Engine> engine_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::map<const Value*, Tensor> tensors_;
  std::vector<std::vector<const Value*>> last_use_;
};

}  // namespace kiln
