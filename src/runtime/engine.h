#pragma once
// The runtime: a deserialized engine and the execution contexts that run it.
// One engine, many contexts (one per thread or stream); a context owns its kernel instances.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/engine_format.h"
#include "graph/graph.h"
#include "kernels/registry.h"

namespace kiln {

class ContextImpl;

/// A value at run time: a tensor, a sequence of tensors, or an optional of either (maybe empty).
struct RuntimeValue {
  ValueKind kind = ValueKind::kTensor;
  bool present = true;        ///< false: an empty optional
  Tensor tensor;              ///< a tensor (or the tensor an optional holds)
  std::vector<Tensor> items;  ///< a sequence's elements

  static RuntimeValue of(Tensor t) { return {ValueKind::kTensor, true, std::move(t), {}}; }
  static RuntimeValue sequence(std::vector<Tensor> items) { return {ValueKind::kSequence, true, {}, std::move(items)}; }
};

class EngineImpl : public std::enable_shared_from_this<EngineImpl> {
 public:
  /// Reads a serialized engine; a corrupt file, another format version or a kernel this kiln lacks
  /// is an error that says to rebuild the engine. `storage`, when given, keeps `bytes` alive and the
  /// constants use them in place; otherwise the weights are copied once.
  static Result<std::shared_ptr<const EngineImpl>> deserialize(std::string_view bytes,
                                                               std::shared_ptr<const void> storage = nullptr);
  /// Maps an engine file read-only and reads it; constants are used in place in the mapping.
  static Result<std::shared_ptr<const EngineImpl>> load_file(const std::string& path);

  const Graph& graph() const { return *graph_; }
  const EngineHeader& header() const { return header_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// One line per node: name, op, kernel.
  std::string inspect() const;
  Result<std::unique_ptr<ContextImpl>> create_execution_context() const;

  struct Step {
    Node* node;
    const KernelImpl* impl;                   ///< nullptr for a host op (the runtime runs it)
    std::vector<std::vector<Step>> subplans;  ///< one per subgraph of the node
  };
  const std::vector<Step>& steps() const { return steps_; }

 private:
  EngineHeader header_;
  std::unique_ptr<Graph> graph_;
  std::vector<Step> steps_;
};

class ContextImpl {
 public:
  explicit ContextImpl(std::shared_ptr<const EngineImpl> engine);
  /// Binds a host tensor to a graph input; dtype and rank must match, static dims must agree.
  Status set_input(const std::string& name, Tensor value);
  /// Binds a sequence or optional (or a tensor) to a graph input of that kind.
  Status set_input_value(const std::string& name, RuntimeValue value);
  /// Runs every node; output shapes follow the inputs' actual shapes.
  Status execute(Stream& stream = cpu_stream());
  Result<Tensor> output(const std::string& name) const;
  /// Called after every step of the top-level plan with the layer's name, its kernel and its time.
  using LayerTimer = std::function<void(std::string_view layer, std::string_view kernel, double ms)>;
  void set_layer_timer(LayerTimer timer) { layer_timer_ = std::move(timer); }
  /// Where intermediates and outputs are allocated (the CPU allocator unless replaced); must outlive the context.
  void set_allocator(Allocator& allocator) { allocator_ = &allocator; }
  /// Any output, including sequences and optionals.
  Result<RuntimeValue> output_value(const std::string& name) const;

  using Scope = std::map<const Value*, RuntimeValue>;
  /// For host ops: runs subgraph `sub` of `step` with `args` as its inputs and the enclosing `scope` for its captures.
  Result<std::vector<RuntimeValue>> call_subgraph(const EngineImpl::Step& step, size_t sub, const Scope& scope,
                                                  std::vector<RuntimeValue> args, Stream& stream, int depth);

 private:
  /// Runs the steps of `graph` in `scope` (inputs, captures and constants already bound).
  Status run_plan(const Graph& graph, const std::vector<EngineImpl::Step>& steps, Scope& scope, Stream& stream,
                  int depth);
  Status run_kernel(const EngineImpl::Step& step, Scope& scope, Stream& stream);
  const std::vector<std::vector<const Value*>>& last_use(const Graph& graph,
                                                         const std::vector<EngineImpl::Step>& steps);

  std::shared_ptr<const EngineImpl> engine_;
  LayerTimer layer_timer_;
  Allocator* allocator_ = &cpu_allocator();
  std::map<const Node*, std::unique_ptr<Kernel>> kernels_;
  Scope values_;
  std::map<const Graph*, std::vector<std::vector<const Value*>>> last_use_;
};

/// Runs one host op (If, Loop, Scan, sequence and optional ops) in `scope`.
Status run_host_op(ContextImpl& ctx, const EngineImpl::Step& step, ContextImpl::Scope& scope, Stream& stream,
                   int depth);

}  // namespace kiln
