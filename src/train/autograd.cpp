#include "train/autograd.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ops/elementwise/elementwise.h"
#include "ops/grad.h"

namespace kiln::train {
namespace {

bool is_float(DataType t) { return is_floating(t); }

/// The training graph as one node's gradient rule sees it.
class NodeGradBuilder final : public GradBuilder {
 public:
  struct Shared {
    Graph* graph;
    std::vector<Value*> values;
    std::unordered_map<const Value*, int> ids;
    std::unordered_map<const Value*, Value*> grads;
    std::unordered_set<const Value*> requires_grad;
    bool training = true;
    int counter = 0;
    int added = 0;

    int id(Value* v) {
      auto [it, fresh] = ids.emplace(v, static_cast<int>(values.size()));
      if (fresh) values.push_back(v);
      return it->second;
    }
    std::string fresh_name(const std::string& base) {
      std::string name;
      do name = base + "#" + std::to_string(counter++);
      while (graph->find_value(name) || graph->find_node(name));
      return name;
    }
    /// grads[v] += g (a sum node when v already has a gradient).
    Status accumulate(Value* v, Value* g) {
      auto it = grads.find(v);
      if (it == grads.end()) {
        grads[v] = g;
        return {};
      }
      auto attrs = std::make_unique<ElementWiseAttrs>(elementwise_attrs(ElementWiseOp::kSum));
      KILN_ASSIGN_OR_RETURN(Node * sum, graph->add_node("ElementWise", fresh_name(v->name + "/grad/accumulate"),
                                                        std::move(attrs), {it->second, g}));
      ++added;
      it->second = sum->outputs[0];
      return {};
    }
  };

  NodeGradBuilder(Shared& shared, Node& node) : s_(shared), node_(node) {}

  const Attrs& attrs() const override { return *node_.attrs; }
  int num_inputs() const override { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const override { return static_cast<int>(node_.outputs.size()); }
  GradValue input(int i) const override { return wrap(i < num_inputs() ? node_.inputs[i] : nullptr); }
  GradValue output(int i) const override { return wrap(i < num_outputs() ? node_.outputs[i] : nullptr); }
  TensorDesc desc(GradValue v) const override {
    const Value* value = get(v);
    return value ? value->desc() : TensorDesc::absent();
  }
  const Tensor* value(GradValue v) const override {
    const Value* value = get(v);
    return value ? value->value() : nullptr;
  }
  GradValue grad_output(int i) const override {
    if (i >= num_outputs()) return {};
    auto it = s_.grads.find(node_.outputs[i]);
    return it == s_.grads.end() ? GradValue{} : wrap(it->second);
  }
  bool needs_grad(int i) const override {
    return i < num_inputs() && node_.inputs[i] && s_.requires_grad.count(node_.inputs[i]) > 0;
  }
  Status set_grad(int i, GradValue g) override {
    Value* gv = get(g);
    if (!needs_grad(i) || !gv) return {};
    Value* in = node_.inputs[i];
    if (gv->dims != in->dims || gv->dtype != in->dtype)
      return internal_error("the gradient rule of op ", node_.op(), " gave input ", i, " a gradient of ",
                            gv->to_string(), " for ", in->to_string());
    return s_.accumulate(in, gv);
  }
  Result<std::vector<GradValue>> add(std::string_view op, std::unique_ptr<Attrs> attrs,
                                     std::vector<GradValue> inputs) override {
    std::vector<Value*> ins;
    ins.reserve(inputs.size());
    for (GradValue v : inputs) ins.push_back(get(v));
    auto node = s_.graph->add_node(op, s_.fresh_name(node_.name + "/grad/" + std::string(op)), std::move(attrs),
                                   std::move(ins));
    if (!node.is_ok()) return with_context(node.status());
    ++s_.added;
    std::vector<GradValue> outs;
    for (Value* o : (*node)->outputs) outs.push_back(wrap(o));
    return outs;
  }
  Result<GradValue> constant(Tensor value) override {
    auto v = s_.graph->add_constant(s_.fresh_name(node_.name + "/grad/const"), std::move(value));
    if (!v.is_ok()) return with_context(v.status());
    return wrap(*v);
  }
  bool training() const override { return s_.training; }

  Status with_context(Status inner) const {
    return std::move(inner).with_prefix("gradient").with_node(node_.context());
  }

 private:
  GradValue wrap(Value* v) const { return v ? GradValue{s_.id(v)} : GradValue{}; }
  Value* get(GradValue v) const {
    return v.valid() && v.id < static_cast<int>(s_.values.size()) ? s_.values[v.id] : nullptr;
  }

  Shared& s_;
  Node& node_;
};

/// Turns constant `v` into a graph input of the same name; returns the input and its former value.
Result<Value*> constant_to_input(Graph& g, Value* v, std::map<std::string, Tensor>& initial) {
  const std::string name = v->name;
  Tensor value = v->constant;
  KILN_RETURN_IF_ERROR(g.rename_value(v, name + "#replaced"));
  KILN_ASSIGN_OR_RETURN(Value * in, g.add_input(name, v->dtype, v->dims));
  g.replace_all_uses(v, in);
  initial[name] = std::move(value);
  return in;
}

}  // namespace

Result<TrainingGraph> build_training_graph(const Graph& model, const std::string& loss,
                                           const AutogradOptions& options) {
  TrainingGraph out;
  out.graph = model.clone();
  Graph& g = *out.graph;
  Value* loss_value = g.find_value(loss);
  if (!loss_value) return invalid_argument("the loss '", loss, "' is not a value of the model");
  if (!is_float(loss_value->dtype) || loss_value->dims.numel() != 1)
    return invalid_argument("the loss '", loss, "' must be one floating-point number, but it is ",
                            loss_value->to_string());
  out.loss = loss;
  const std::set<std::string> state(options.state.begin(), options.state.end());

  // Candidates: what the caller names, else floating constants of more than one element (scalars are
  // part of the computation, not weights).
  std::vector<Value*> candidates;
  if (!options.params.empty()) {
    for (const std::string& name : options.params) {
      Value* v = g.find_value(name);
      if (!v) return invalid_argument("parameter '", name, "' is not a value of the model");
      if (!is_float(v->dtype) || !(v->is_constant() || v->is_graph_input))
        return invalid_argument("parameter '", name, "' must be a floating-point constant or graph input, but is ",
                                v->to_string());
      candidates.push_back(v);
    }
  } else {
    for (Value* v : g.values())
      if (v->is_constant() && is_float(v->dtype) && v->dims.numel() > 1 && !state.count(v->name))
        candidates.push_back(v);
  }

  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::set<const Value*> stopped;
  for (const std::string& name : options.stop_gradient) {
    const Value* v = g.find_value(name);
    if (!v) return invalid_argument("stop-gradient value '", name, "' is not a value of the model");
    stopped.insert(v);
  }
  NodeGradBuilder::Shared shared{.graph = &g, .training = options.training};
  for (Value* v : candidates)
    if (!stopped.count(v)) shared.requires_grad.insert(v);
  for (Node* n : order) {
    bool any =
        std::any_of(n->inputs.begin(), n->inputs.end(), [&](Value* v) { return v && shared.requires_grad.count(v); });
    if (!any) continue;
    for (Value* o : n->outputs)
      if (is_float(o->dtype) && !stopped.count(o)) shared.requires_grad.insert(o);
  }
  if (!shared.requires_grad.count(loss_value))
    return invalid_argument("the loss '", loss, "' does not depend on any parameter: there is nothing to train");

  // The loss's ancestors, then the rules in reverse order.
  std::unordered_set<const Node*> needed;
  std::vector<Node*> stack;
  if (loss_value->producer) stack.push_back(loss_value->producer);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!needed.insert(n).second) continue;
    for (Value* v : n->inputs)
      if (v && v->producer && shared.requires_grad.count(v)) stack.push_back(v->producer);
  }
  Value* seed_value = nullptr;
  if (options.loss_scale_input) {
    if (g.find_value(std::string(kLossScaleInput)))
      return invalid_argument("the model already has a value named '", kLossScaleInput, "': rename it");
    KILN_ASSIGN_OR_RETURN(seed_value, g.add_input(std::string(kLossScaleInput), loss_value->dtype, loss_value->dims));
  } else {
    KILN_ASSIGN_OR_RETURN(Tensor seed, Tensor::empty(loss_value->dtype, loss_value->dims));
    store_element(seed.raw(), seed.dtype(), 0, 1.0);
    KILN_ASSIGN_OR_RETURN(seed_value, g.add_constant(shared.fresh_name(loss + ".grad_seed"), std::move(seed)));
  }
  shared.grads[loss_value] = seed_value;

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (!needed.count(n)) continue;
    bool reached = std::any_of(n->outputs.begin(), n->outputs.end(), [&](Value* o) { return shared.grads.count(o); });
    if (!reached) continue;
    GradFn rule = find_grad(n->op());
    if (!rule)
      return unsupported("node '", n->name, "' (op ", n->op(),
                         ") has no gradient rule, so kiln cannot train through it: ",
                         "freeze the parameters before it, or build the model without this op");
    NodeGradBuilder builder(shared, *n);
    Status st = rule(builder);
    if (!st.is_ok()) return builder.with_context(st);
  }
  out.backward_nodes = shared.added;

  // Parameters a gradient reached become inputs with a gradient output; the others stay as they were.
  if (!loss_value->is_graph_input) {
    bool marked = std::find(g.outputs().begin(), g.outputs().end(), loss_value) != g.outputs().end();
    if (!marked) KILN_RETURN_IF_ERROR(g.mark_output(loss_value));
  }
  std::unordered_set<const Value*> used_as_grad;
  for (Value* p : candidates) {
    auto it = shared.grads.find(p);
    if (it == shared.grads.end()) {
      if (!options.params.empty() && !options.allow_unreached)
        return invalid_argument("no gradient reaches parameter '", p->name, "' from the loss '", loss, "'");
      continue;
    }
    Value* grad = it->second;
    const std::string name = p->name;
    if (p->is_constant()) {
      KILN_RETURN_IF_ERROR(constant_to_input(g, p, out.initial).status());
    }
    const bool own = grad->producer && !grad->is_graph_input && !used_as_grad.count(grad) &&
                     std::find(g.outputs().begin(), g.outputs().end(), grad) == g.outputs().end() &&
                     shared.ids.count(grad) && grad->producer->name.find("/grad/") != std::string::npos;
    if (!own) {
      KILN_ASSIGN_OR_RETURN(Node * copy, g.add_node("Identity", shared.fresh_name(name + "/grad/copy"),
                                                    OpRegistry::global().find("Identity")->make_attrs(), {grad}));
      grad = copy->outputs[0];
    }
    used_as_grad.insert(grad);
    KILN_RETURN_IF_ERROR(g.rename_value(grad, grad_name(name)));
    KILN_RETURN_IF_ERROR(g.mark_output(grad));
    out.params.push_back(name);
    out.grads.push_back(grad_name(name));
  }
  for (const std::string& name : options.state) {
    Value* v = g.find_value(name);
    if (!v) return invalid_argument("state '", name, "' is not a value of the model");
    if (v->is_constant()) KILN_RETURN_IF_ERROR(constant_to_input(g, v, out.initial).status());
  }
  if (out.params.empty()) return invalid_argument("no gradient reaches any parameter from the loss '", loss, "'");
  g.remove_dead_nodes();
  KILN_RETURN_IF_ERROR(g.verify());
  return out;
}

}  // namespace kiln::train
