#include "passes/pattern.h"

#include <algorithm>

namespace kiln {

bool is_graph_output(const Graph& graph, const Value* value) {
  const auto& outs = graph.outputs();
  return std::find(outs.begin(), outs.end(), value) != outs.end();
}

Node* sole_consumer(const Graph& graph, const Value* value) {
  if (!value || value->uses.size() != 1 || is_graph_output(graph, value)) return nullptr;
  return value->uses.front().node;
}

std::optional<std::vector<Node*>> match_chain(const Graph& graph, Node* head, std::span<const PatternStep> steps) {
  std::vector<Node*> nodes;
  Node* n = head;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!n || n->op() != steps[i].op || (steps[i].where && !steps[i].where(*n))) return std::nullopt;
    nodes.push_back(n);
    if (i + 1 < steps.size()) n = n->outputs.empty() ? nullptr : sole_consumer(graph, n->outputs[0]);
  }
  return nodes;
}

std::optional<std::vector<Node*>> match_chain(const Graph& graph, Node* head,
                                              std::initializer_list<PatternStep> steps) {
  return match_chain(graph, head, std::span<const PatternStep>(steps.begin(), steps.size()));
}

std::string fused_name(std::span<Node* const> nodes) {
  std::string name;
  for (Node* n : nodes) name += (name.empty() ? "" : " + ") + n->name;
  return name;
}

std::string quoted(std::span<Node* const> nodes) {
  std::string s;
  for (Node* n : nodes) s += (s.empty() ? "'" : " + '") + n->name + "'";
  return s;
}

std::string free_name(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.find_value(name) || g.find_node(name); ++i) name = str_cat(base, "_", i);
  return name;
}

std::optional<double> known_scalar(const Value* value) {
  const Tensor* t = value ? value->value() : nullptr;
  if (!t || t->numel() != 1 || !is_floating(t->dtype())) return std::nullopt;
  std::vector<double> v = tensor_to_doubles(*t);
  return v.empty() ? std::nullopt : std::optional<double>(v[0]);
}

bool known_all_equal(const Value* value, double x) {
  const Tensor* t = value ? value->value() : nullptr;
  if (!t || t->numel() == 0 || !is_floating(t->dtype())) return false;
  const std::vector<double> v = tensor_to_doubles(*t);
  return std::all_of(v.begin(), v.end(), [&](double e) { return e == x; });
}

Result<Node*> replace_with_node(PassContext& ctx, std::span<Node* const> nodes, std::string_view op,
                                std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs, std::string name) {
  Graph& g = ctx.graph();
  if (nodes.empty()) return internal_error("replace_with_node: no nodes");
  Node* last = nodes.back();
  for (Node* n : nodes.first(nodes.size() - 1))
    for (Value* out : n->outputs) {
      if (is_graph_output(g, out)) return invalid_argument("'", out->name, "' is a graph output");
      for (const Use& u : out->uses)
        if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end())
          return invalid_argument("'", out->name, "' is also read by '", u.node->name, "'");
    }
  if (name.empty()) name = fused_name(nodes);
  const std::string temp = name + "#fusing";
  std::vector<std::string> temp_outputs;
  for (Value* out : last->outputs) temp_outputs.push_back(out->name + "#fusing");
  KILN_ASSIGN_OR_RETURN(Node * fused, g.add_node(op, temp, std::move(attrs), std::move(inputs), temp_outputs));
  Status why =
      fused->outputs.size() == last->outputs.size()
          ? Status::ok()
          : invalid_argument("the fused layer has ", fused->outputs.size(), " outputs, not ", last->outputs.size());
  for (size_t i = 0; why.is_ok() && i < fused->outputs.size(); ++i)
    if (fused->outputs[i]->dtype != last->outputs[i]->dtype || fused->outputs[i]->dims != last->outputs[i]->dims)
      why = invalid_argument("the fused layer's output ", fused->outputs[i]->to_string(), " differs from ",
                             last->outputs[i]->to_string());
  if (why.is_ok()) why = ctx.backend_accepts(*fused);
  if (!why.is_ok()) {
    KILN_RETURN_IF_ERROR(g.remove_node(fused));
    return why;
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < last->outputs.size(); ++i) {
    Value* old = last->outputs[i];
    names.push_back(old->name);
    fused->outputs[i]->dim_names = old->dim_names;
    fused->outputs[i]->type = old->type;
    g.replace_all_uses(old, fused->outputs[i]);
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) KILN_RETURN_IF_ERROR(g.remove_node(*it));
  for (size_t i = 0; i < names.size(); ++i) KILN_RETURN_IF_ERROR(g.rename_value(fused->outputs[i], names[i]));
  KILN_RETURN_IF_ERROR(g.rename_node(fused, name));
  return fused;
}

Status bypass_node(Graph& graph, Node* node, Value* input) {
  Value* out = node->outputs.at(0);
  if (is_graph_output(graph, out)) {
    if (!input->producer || is_graph_output(graph, input))
      return invalid_argument("'", out->name, "' is a graph output and '", input->name, "' cannot take its name");
    const std::string name = out->name;
    graph.replace_all_uses(out, input);
    KILN_RETURN_IF_ERROR(graph.remove_node(node));
    return graph.rename_value(input, name);
  }
  graph.replace_all_uses(out, input);
  return graph.remove_node(node);
}

}  // namespace kiln
