#include "graph/unroll_loops.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/logger.h"

namespace kiln {
namespace {

std::optional<int64_t> known_scalar(const Value* v) {
  const Tensor* t = v ? v->value() : nullptr;
  if (!t || t->numel() != 1) return std::nullopt;
  const double x = t->at(0);
  if (!(x >= -1e18 && x <= 1e18)) return std::nullopt;  // INT64_MAX "no limit" and NaN alike
  return static_cast<int64_t>(x);
}

// Why `loop` stays a loop, or "" when it may be unrolled (then *trips is set).
std::string keep_reason(const Node& loop, const UnrollLimits& limits, int64_t* trips) {
  if (loop.subgraphs.size() != 1 || !loop.subgraphs[0].graph) return "it has no body";
  const Graph& body = *loop.subgraphs[0].graph;
  const auto m = known_scalar(loop.inputs.empty() ? nullptr : loop.inputs[0]);
  if (!m) return "its trip count is known only at run time";
  if (*m < 0 || *m > limits.max_trips) return str_cat("its trip count ", *m, " is above ", limits.max_trips);
  if (loop.inputs.size() > 1 && loop.inputs[1]) {
    const auto c = known_scalar(loop.inputs[1]);
    if (!c || *c == 0) return "its condition is not a constant true";
  }
  if (body.inputs().size() < 2) return "its body has fewer than two inputs";
  const size_t carried = body.inputs().size() - 2;
  if (body.outputs().size() != carried + 1) return "it has scan outputs";
  if (loop.outputs.size() != carried) return "its outputs do not match its carried values";
  if (loop.inputs.size() < carried + 2) return "it has fewer inputs than carried values";
  const Value* cond_in = body.inputs()[1];
  const Value* cond_out = body.outputs()[0];
  const bool passes_through = cond_out == cond_in || (cond_out->producer && cond_out->producer->op() == "Identity" &&
                                                      cond_out->producer->inputs[0] == cond_in);
  const auto c = known_scalar(cond_out);
  if (!passes_through && !(c && *c != 0)) return "its body computes its exit condition";
  const std::vector<Node*> nodes = body.nodes();
  for (const Node* n : nodes)
    if (!n->subgraphs.empty()) return str_cat("its body node '", n->name, "' owns graphs");
  if (static_cast<int64_t>(nodes.size()) * *m > limits.max_nodes)
    return str_cat("unrolled it would have ", static_cast<int64_t>(nodes.size()) * *m, " nodes (at most ",
                   limits.max_nodes, ")");
  *trips = *m;
  return {};
}

Result<Value*> scalar_constant(Graph& graph, const std::string& name, DataType dtype, int64_t x) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, {}));
  if (dtype == DataType::kInt64)
    *t.data<int64_t>() = x;
  else
    *t.data<bool>() = x != 0;
  return graph.add_constant(name, std::move(t));
}

Status unroll(Graph& graph, Node* loop, int64_t trips) {
  const Graph& body = *loop->subgraphs[0].graph;
  const std::string base = loop->name;
  const size_t n = body.inputs().size() - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, body.topological_order());
  std::vector<Value*> carried(loop->inputs.begin() + 2, loop->inputs.begin() + 2 + static_cast<std::ptrdiff_t>(n));
  // Body constants and captures are the same outer value in every trip.
  std::unordered_map<const Value*, Value*> shared;
  for (Value* c : body.captures()) {
    Value* outer = graph.find_value(c->name);
    if (!outer) return invalid_argument("the body captures '", c->name, "', which is not in scope");
    shared[c] = outer;
  }
  std::unordered_set<const Value*> made;  // values this unrolling created
  Value* cond = loop->inputs.size() > 1 ? loop->inputs[1] : nullptr;
  for (int64_t trip = 0; trip < trips; ++trip) {
    const std::string prefix = str_cat(base, "/trip", trip, "/");
    std::unordered_map<const Value*, Value*> map = shared;
    if (!body.inputs()[0]->uses.empty()) {
      KILN_ASSIGN_OR_RETURN(map[body.inputs()[0]],
                            scalar_constant(graph, prefix + "iteration", DataType::kInt64, trip));
    }
    if (!body.inputs()[1]->uses.empty() || body.outputs()[0] == body.inputs()[1]) {
      if (!cond) {
        KILN_ASSIGN_OR_RETURN(cond, scalar_constant(graph, base + "/condition", DataType::kBool, 1));
      }
      map[body.inputs()[1]] = cond;
    }
    for (size_t k = 0; k < n; ++k) map[body.inputs()[2 + k]] = carried[k];
    auto resolve = [&](const Value* v) -> Result<Value*> {
      if (auto it = map.find(v); it != map.end()) return it->second;
      if (!v->is_constant()) return internal_error("body value '", v->name, "' is used before it is made");
      KILN_ASSIGN_OR_RETURN(Value * c, graph.add_constant(str_cat(base, "/", v->name), v->constant));
      shared[v] = c;
      map[v] = c;
      return c;
    };
    for (const Node* bn : order) {
      std::vector<Value*> inputs;
      inputs.reserve(bn->inputs.size());
      for (const Value* v : bn->inputs) {
        Value* mapped = nullptr;
        if (v) {
          KILN_ASSIGN_OR_RETURN(mapped, resolve(v));
        }
        inputs.push_back(mapped);
      }
      std::vector<std::string> names;
      names.reserve(bn->outputs.size());
      for (const Value* o : bn->outputs) names.push_back(prefix + o->name);
      KILN_ASSIGN_OR_RETURN(Node * copy, graph.add_node(bn->op(), prefix + bn->name,
                                                        bn->attrs ? bn->attrs->clone() : nullptr, inputs, names));
      for (size_t i = 0; i < bn->outputs.size(); ++i) {
        map[bn->outputs[i]] = copy->outputs[i];
        made.insert(copy->outputs[i]);
      }
    }
    for (size_t k = 0; k < n; ++k) {
      KILN_ASSIGN_OR_RETURN(carried[k], resolve(body.outputs()[1 + k]));
    }
  }
  // The results keep the loop's output names: a value this unrolling made is renamed (once); an outer value
  // the body passed through, or one result standing for two outputs, gets an Identity copy.
  std::vector<std::pair<Value*, std::string>> results;
  std::unordered_set<const Value*> taken;
  for (size_t k = 0; k < n; ++k) {
    Value* result = carried[k];
    const std::string name = loop->outputs[k]->name;
    if (!made.count(result) || !taken.insert(result).second) {
      KILN_ASSIGN_OR_RETURN(Node * copy, graph.add_node("Identity", name + "/identity", nullptr, {result}));
      result = copy->outputs[0];
    }
    graph.replace_all_uses(loop->outputs[k], result);
    results.emplace_back(result, name);
  }
  KILN_RETURN_IF_ERROR(graph.remove_node(loop));
  for (auto& [value, name] : results) KILN_RETURN_IF_ERROR(graph.rename_value(value, name));
  return Status::ok();
}

}  // namespace

Result<int> unroll_small_loops(Graph& graph, const UnrollLimits& limits) {
  int unrolled = 0;
  for (Node* node : graph.nodes()) {
    if (node->op() != "Loop") continue;
    int64_t trips = 0;
    const std::string reason = keep_reason(*node, limits, &trips);
    if (!reason.empty()) {
      log_verbose("unroll-loop: Loop '", node->name, "' stays a loop: ", reason);
      continue;
    }
    const std::string name = node->name;
    const size_t body_nodes = node->subgraphs[0].graph->nodes().size();
    Status s = unroll(graph, node, trips);
    if (!s.is_ok()) return Status(s.code(), str_cat("unroll-loop: Loop '", name, "': ", s.message()));
    log_info("unroll-loop: Loop '", name, "' with ", trips, " trips of ", body_nodes, " nodes unrolled");
    ++unrolled;
  }
  return unrolled;
}

}  // namespace kiln
