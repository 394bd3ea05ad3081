#pragma once
// The graph IR: values (typed, shaped, possibly constant) and nodes that apply registered ops.
// The network API, the ONNX importer, the passes, the builder and training all work on it.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/neural_type.h"
#include "kiln/tensor.h"
#include "ops/registry.h"

namespace kiln {

class Node;
class Graph;

struct Use {
  Node* node;
  int input;
};

class Value {
 public:
  int id = -1;
  std::string name;
  DataType dtype = DataType::kFloat32;  ///< for sequences and optionals: of the element
  ValueKind kind = ValueKind::kTensor;
  Dims dims;                           ///< kDynamicDim where unknown until run time
  std::vector<std::string> dim_names;  ///< symbolic names ("batch", "seq") per dim; "" where none
  std::optional<NeuralType> type;      ///< optional semantic type
  Node* producer = nullptr;            ///< nullptr for graph inputs and constants
  int producer_output = 0;
  std::vector<Use> uses;
  Tensor constant;  ///< defined for weights and other constants (host memory)
  /// A node output whose value was computed at build time (constant folding); inference reads it and
  /// Graph::fold_known_values() turns it into a constant.
  std::optional<Tensor> known_value;
  bool is_graph_input = false;
  /// In a subgraph: stands for the value of the same name in an enclosing graph.
  bool is_capture = false;
  /// A constant an engine stores only as the prepared data of the steps that read it (weights packed for a
  /// kernel, see KernelImpl::prepared_replaces_input): its dtype and dims are known, `constant` is undefined.
  bool prepared_only = false;

  bool is_constant() const { return constant.defined(); }
  /// The host value when it is known before run time (a constant or a folded output), else nullptr.
  const Tensor* value() const { return constant.defined() ? &constant : known_value ? &*known_value : nullptr; }
  TensorDesc desc() const { return {dtype, dims, true, kind}; }
  /// "x: float32[batch, 3, 224, 224]".
  std::string to_string() const;
};

/// A graph a node owns (If's then_branch, Loop's body), named by its ONNX attribute.
struct Subgraph {
  std::string name;
  std::unique_ptr<Graph> graph;
};

class Node {
 public:
  int id = -1;
  std::string name;
  const OpSchema* schema = nullptr;
  std::unique_ptr<Attrs> attrs;
  std::vector<Value*> inputs;  ///< nullptr for a skipped optional input
  std::vector<Value*> outputs;
  /// Graphs the node owns. Their captures are also inputs of the node (after its own inputs), so
  /// ordering, liveness and uses see them.
  std::vector<Subgraph> subgraphs;
  /// Neural types this node expects on its inputs (empty or nullopt: no check).
  std::vector<std::optional<NeuralType>> expected_input_types;

  const std::string& op() const { return schema->name; }
  NodeContext context() const { return {id, name, schema ? schema->name : ""}; }
};

/// Limits on constant folding: the bytes one node may produce and the work (element operations,
/// from the op's fold_cost) one fold may take.
struct FoldLimits {
  size_t max_node_bytes = size_t{1} << 24;
  double max_work = 4e9;
};

/// What try_fold did: folded, or left the node to run time with a reason (logged at verbose);
/// `failure` holds the evaluator's error when the computation itself failed.
struct FoldOutcome {
  bool folded = false;
  Status failure;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  /// A deep copy (values, nodes, attributes, subgraphs; constants share their host data, which passes never
  /// change in place). The optimizer rewrites a clone so the caller's graph stays as it was.
  std::unique_ptr<Graph> clone() const;

  /// A graph input; `dim_names` (optional) names symbolic dims.
  Result<Value*> add_input(std::string name, DataType dtype, Dims dims, std::vector<std::string> dim_names = {});
  /// A constant (weights); the tensor is kept on the host.
  Result<Value*> add_constant(std::string name, Tensor value);
  /// A constant whose data only the steps reading it hold, as their prepared data (an engine's packed weights).
  Result<Value*> add_prepared_only_constant(std::string name, DataType dtype, Dims dims);
  /// Adds a node of registered op `op`: checks the inputs, infers the outputs (reading constant inputs'
  /// values where the op needs them) and creates them named `output_names` (or "<name>:<i>").
  /// Errors carry the node's context.
  Result<Node*> add_node(std::string_view op, std::string name, std::unique_ptr<Attrs> attrs,
                         std::vector<Value*> inputs, std::vector<std::string> output_names = {},
                         std::vector<Subgraph> subgraphs = {});
  /// In a subgraph: a value standing for `outer` of an enclosing graph, matched by name at run time.
  Result<Value*> add_capture(const Value& outer);
  const std::vector<Value*>& captures() const { return captures_; }
  Status mark_output(Value* value);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Nodes in insertion order (a topological order while the graph is built front to back).
  std::vector<Node*> nodes() const;
  std::vector<Value*> values() const;
  Value* find_value(std::string_view name) const;
  Node* find_node(std::string_view name) const;
  /// Renames a value or node (the name must be free); keeps the name index current.
  Status rename_value(Value* value, std::string name);
  Status rename_node(Node* node, std::string name);

  /// Nodes ordered so each comes after its producers, or an error naming a node on a cycle.
  Result<std::vector<Node*>> topological_order() const;
  /// Points every use of `from` (and the graph outputs) at `to`.
  void replace_all_uses(Value* from, Value* to);
  /// Sets input `i` of `node` to `value` (nullptr: a skipped optional input), keeping both values' uses
  /// current. Shapes are not re-inferred: the caller keeps the node valid (verify() checks).
  Status set_input(Node* node, int i, Value* value);
  /// Removes a node whose outputs have no uses and are not graph outputs.
  Status remove_node(Node* node);
  /// Drops nodes and constants nothing reaches the outputs through.
  void remove_dead_nodes();
  /// Computes the outputs of `node` with the reference evaluator when every input value is known, the
  /// outputs are small and the work is within `limits`; sets their known_value.
  FoldOutcome try_fold(Node* node, const FoldLimits& limits = {});
  /// The estimated work of folding `node` now (its op's fold_cost), or nullopt when an input is unknown.
  std::optional<double> fold_work(const Node& node) const;
  /// Replaces every node whose outputs all have known values with constants of the same names.
  Status fold_known_values();

  /// Checks types, shapes (by re-running inference), dangling and duplicate values, cycles and
  /// neural types on every connection; reports every problem found, one per line.
  Status verify() const;
  /// A readable listing: inputs, one line per node, outputs.
  std::string to_text() const { return to_text(0); }
  std::string to_text(int indent) const;
  /// Re-runs shape inference front to back (after an input's dims change).
  Status infer_shapes();

 private:
  Value* new_value(std::string name);
  void forget_value(Value* value);
  void forget_node(Node* node);
  Result<std::vector<TensorDesc>> infer_node(const Node& node) const;

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, outputs_, captures_;
  std::unordered_map<std::string, Value*> value_by_name_;
  std::unordered_map<std::string, Node*> node_by_name_;
  std::unordered_set<const Value*> owned_;
  int next_value_id_ = 0, next_node_id_ = 0;
};

/// An error inside subgraph `sub` of `owner`, named with its path: "If_3404/then_branch/node 12 'Gather_7' ...".
Status subgraph_error(const Node& owner, const std::string& sub, const Status& inner);

}  // namespace kiln
