#pragma once
// The small pattern matcher and rewrite helpers the passes share: chains of nodes linked by sole
// consumers, and replacing such a chain by one fused node that keeps the chain's output names.
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "passes/pass.h"

namespace kiln {

bool is_graph_output(const Graph& graph, const Value* value);
/// The one node that reads `value` when it has exactly one use and is not a graph output; else nullptr
/// (an intermediate result others read cannot disappear into a fused layer).
Node* sole_consumer(const Graph& graph, const Value* value);
/// The attributes of `node` as `A` when it is op `op`, else nullptr.
template <class A>
const A* attrs_if(const Node* node, std::string_view op) {
  return node && node->op() == op ? static_cast<const A*>(node->attrs.get()) : nullptr;
}

/// One step of a chain pattern: the op and an optional condition on the node.
struct PatternStep {
  std::string_view op;
  std::function<bool(const Node&)> where = nullptr;
};
/// Matches `steps` from `head`: head is steps[0], the sole consumer of its output 0 is steps[1], and so
/// on. The nodes in order, or nullopt.
std::optional<std::vector<Node*>> match_chain(const Graph& graph, Node* head, std::span<const PatternStep> steps);
std::optional<std::vector<Node*>> match_chain(const Graph& graph, Node* head, std::initializer_list<PatternStep> steps);

/// "conv1 + relu1": the names of `nodes` joined as TensorRT names fused layers.
std::string fused_name(std::span<Node* const> nodes);
/// "'conv1' + 'relu1'": the names quoted for messages.
std::string quoted(std::span<Node* const> nodes);
/// A name no value or node of `g` has: `base`, else `base_1`, `base_2`, ...
std::string free_name(const Graph& g, const std::string& base);
/// The scalar value of a known (constant or folded) value with one element, as double; nullopt otherwise.
std::optional<double> known_scalar(const Value* value);
/// Whether every element of a known float value equals `x`.
bool known_all_equal(const Value* value, double x);

/// Replaces `nodes` (a connected group in topological order whose only outputs used outside it are those of the
/// last node; checked: otherwise refused) with
/// one node of `op`, named `name` (default: fused_name(nodes)). The new node's outputs take the last node's
/// output names, so graph outputs keep theirs. The backend hook is asked first: on a refusal, or when the
/// new node's outputs differ in dtype or dims from the old ones, the graph is left as it was and the status
/// says why.
Result<Node*> replace_with_node(PassContext& ctx, std::span<Node* const> nodes, std::string_view op,
                                std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs, std::string name = {});
/// Removes `node`, whose output 0 passes `input` through unchanged: its readers read `input` instead. When the
/// output is a graph output, `input` takes its name (refused when `input` is a graph input, a constant or
/// itself an output).
Status bypass_node(Graph& graph, Node* node, Value* input);

}  // namespace kiln
