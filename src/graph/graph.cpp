#include "graph/graph.h"

#include <algorithm>
#include <map>
#include <set>

#include "kiln/logger.h"
#include "ops/evaluator.h"
#include "ops/fold_cost.h"

namespace kiln {

std::string Value::to_string() const {
  std::string s = name + ": " + (kind == ValueKind::kTensor ? "" : str_cat(value_kind_name(kind), " of ")) +
                  std::string(dtype_name(dtype)) + "[";
  for (int i = 0; i < dims.rank(); ++i) {
    if (i) s += ", ";
    const bool named = i < static_cast<int>(dim_names.size()) && !dim_names[i].empty();
    s += dims[i] >= 0 ? std::to_string(dims[i]) : (named ? dim_names[i] : "?");
  }
  s += "]";
  if (type) s += " " + type->to_string();
  return s;
}

Value* Graph::new_value(std::string name) {
  auto v = std::make_unique<Value>();
  v->id = next_value_id_++;
  v->name = std::move(name);
  value_by_name_.emplace(v->name, v.get());
  owned_.insert(v.get());
  values_.push_back(std::move(v));
  return values_.back().get();
}

Result<Value*> Graph::add_input(std::string name, DataType dtype, Dims dims, std::vector<std::string> dim_names) {
  if (find_value(name)) return invalid_argument("graph input '", name, "': a value of that name already exists");
  if (!dim_names.empty() && static_cast<int>(dim_names.size()) != dims.rank())
    return invalid_argument("graph input '", name, "': ", dim_names.size(), " dim names for rank ", dims.rank());
  Value* v = new_value(std::move(name));
  v->dtype = dtype;
  v->dims = dims;
  v->dim_names = std::move(dim_names);
  v->is_graph_input = true;
  inputs_.push_back(v);
  return v;
}

Result<Value*> Graph::add_capture(const Value& outer) {
  if (find_value(outer.name))
    return invalid_argument("capture '", outer.name, "': a value of that name already exists");
  Value* v = new_value(outer.name);
  v->dtype = outer.dtype;
  v->kind = outer.kind;
  v->dims = outer.dims;
  v->dim_names = outer.dim_names;
  v->type = outer.type;
  v->is_capture = true;
  captures_.push_back(v);
  return v;
}

Status subgraph_error(const Node& owner, const std::string& sub, const Status& inner) {
  return Status(inner.code(), str_cat(owner.name, "/", sub, "/", inner.to_string()));
}

Result<Value*> Graph::add_constant(std::string name, Tensor value) {
  if (!value.defined()) return invalid_argument("constant '", name, "' has no data");
  if (!value.device().is_cpu()) return invalid_argument("constant '", name, "' must be given in host memory");
  if (find_value(name)) return invalid_argument("constant '", name, "': a value of that name already exists");
  if (!value.is_contiguous()) {
    KILN_ASSIGN_OR_RETURN(value, value.contiguous());
  }
  Value* v = new_value(std::move(name));
  v->dtype = value.dtype();
  v->dims = value.dims();
  v->constant = std::move(value);
  return v;
}

Result<Value*> Graph::add_prepared_only_constant(std::string name, DataType dtype, Dims dims) {
  if (find_value(name)) return invalid_argument("constant '", name, "': a value of that name already exists");
  if (!dims.is_static()) return invalid_argument("constant '", name, "' has dynamic dims ", dims.to_string());
  Value* v = new_value(std::move(name));
  v->dtype = dtype;
  v->dims = dims;
  v->prepared_only = true;
  return v;
}

Result<std::vector<TensorDesc>> Graph::infer_node(const Node& node) const {
  std::vector<TensorDesc> descs;
  std::vector<const Tensor*> values;
  for (Value* in : node.inputs) {
    descs.push_back(in ? in->desc() : TensorDesc::absent());
    values.push_back(in ? in->value() : nullptr);
  }
  InferContext ctx(*node.attrs, descs, values);
  std::vector<SubgraphSig> sigs;
  for (const Subgraph& sub : node.subgraphs) {
    SubgraphSig sig{sub.name, {}, {}};
    for (Value* v : sub.graph->inputs()) sig.inputs.push_back(v->desc());
    for (Value* v : sub.graph->outputs()) sig.outputs.push_back(v->desc());
    sigs.push_back(std::move(sig));
  }
  ctx.set_subgraphs(sigs);
  auto out = node.schema->infer_outputs(ctx);
  if (!out) return out.take_status().with_node(node.context());
  return out;
}

Result<Node*> Graph::add_node(std::string_view op, std::string name, std::unique_ptr<Attrs> attrs,
                              std::vector<Value*> inputs, std::vector<std::string> output_names,
                              std::vector<Subgraph> subgraphs) {
  const OpSchema* schema = OpRegistry::global().find(op);
  const NodeContext ctx{next_node_id_, name, std::string(op)};
  if (!schema) return unsupported("kiln has no op '", op, "'").with_node(ctx);
  if (find_node(name)) return invalid_argument("a node named '", name, "' already exists").with_node(ctx);
  if (!attrs) attrs = schema->make_attrs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value* in = inputs[i];
    if (!in) continue;
    if (!owned_.count(in)) return invalid_argument("input ", i, " is not a value of this graph").with_node(ctx);
  }
  auto node = std::make_unique<Node>();
  node->id = next_node_id_;
  node->name = std::move(name);
  node->schema = schema;
  node->attrs = std::move(attrs);
  node->inputs = std::move(inputs);
  node->subgraphs = std::move(subgraphs);
  KILN_ASSIGN_OR_RETURN(std::vector<TensorDesc> outs, infer_node(*node));
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string out_name =
        i < output_names.size() && !output_names[i].empty() ? output_names[i] : str_cat(node->name, ":", i);
    if (find_value(out_name))
      return invalid_argument("output '", out_name, "' is already the name of another value")
          .with_node(node->context());
    Value* v = new_value(std::move(out_name));
    v->dtype = outs[i].dtype;
    v->kind = outs[i].kind;
    v->dims = outs[i].dims;
    v->producer = node.get();
    v->producer_output = static_cast<int>(i);
    node->outputs.push_back(v);
  }
  ++next_node_id_;
  for (size_t i = 0; i < node->inputs.size(); ++i)
    if (node->inputs[i]) node->inputs[i]->uses.push_back({node.get(), static_cast<int>(i)});
  node_by_name_.emplace(node->name, node.get());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Status Graph::mark_output(Value* value) {
  if (!value) return invalid_argument("mark_output: no value given");
  if (std::find(outputs_.begin(), outputs_.end(), value) == outputs_.end()) outputs_.push_back(value);
  return Status::ok();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  for (auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  for (auto& v : values_) out.push_back(v.get());
  return out;
}

Value* Graph::find_value(std::string_view name) const {
  auto it = value_by_name_.find(std::string(name));
  return it == value_by_name_.end() ? nullptr : it->second;
}

Node* Graph::find_node(std::string_view name) const {
  auto it = node_by_name_.find(std::string(name));
  return it == node_by_name_.end() ? nullptr : it->second;
}

Status Graph::rename_value(Value* value, std::string name) {
  if (value->name == name) return Status::ok();
  if (find_value(name)) return invalid_argument("value '", value->name, "' cannot be renamed '", name, "': taken");
  if (auto it = value_by_name_.find(value->name); it != value_by_name_.end() && it->second == value)
    value_by_name_.erase(it);
  value->name = std::move(name);
  value_by_name_.emplace(value->name, value);
  return Status::ok();
}

Status Graph::rename_node(Node* node, std::string name) {
  if (node->name == name) return Status::ok();
  if (find_node(name)) return invalid_argument("node '", node->name, "' cannot be renamed '", name, "': taken");
  if (auto it = node_by_name_.find(node->name); it != node_by_name_.end() && it->second == node)
    node_by_name_.erase(it);
  node->name = std::move(name);
  node_by_name_.emplace(node->name, node);
  return Status::ok();
}

void Graph::forget_value(Value* v) {
  if (auto it = value_by_name_.find(v->name); it != value_by_name_.end() && it->second == v) value_by_name_.erase(it);
  owned_.erase(v);
}

void Graph::forget_node(Node* n) {
  if (auto it = node_by_name_.find(n->name); it != node_by_name_.end() && it->second == n) node_by_name_.erase(it);
}

Result<std::vector<Node*>> Graph::topological_order() const {
  std::map<const Node*, int> pending;
  std::vector<Node*> ready, order;
  for (auto& n : nodes_) {
    int deps = 0;
    for (Value* in : n->inputs)
      if (in && in->producer) ++deps;
    pending[n.get()] = deps;
    if (deps == 0) ready.push_back(n.get());
  }
  std::reverse(ready.begin(), ready.end());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (Value* out : n->outputs)
      for (const Use& u : out->uses)
        if (--pending[u.node] == 0) ready.push_back(u.node);
  }
  if (order.size() != nodes_.size()) {
    for (auto& n : nodes_)
      if (pending[n.get()] > 0)
        return invalid_argument("the graph has a cycle through this node").with_node(n->context());
  }
  return order;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (const Use& u : from->uses) {
    u.node->inputs[u.input] = to;
    to->uses.push_back(u);
  }
  from->uses.clear();
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

Status Graph::set_input(Node* node, int i, Value* value) {
  if (i < 0 || i >= static_cast<int>(node->inputs.size()))
    return invalid_argument("set_input: input ", i, " of ", node->inputs.size()).with_node(node->context());
  if (value && !owned_.count(value))
    return invalid_argument("set_input: '", value->name, "' is not a value of this graph").with_node(node->context());
  if (Value* old = node->inputs[i]) {
    auto& uses = old->uses;
    uses.erase(std::remove_if(uses.begin(), uses.end(), [&](const Use& u) { return u.node == node && u.input == i; }),
               uses.end());
  }
  node->inputs[i] = value;
  if (value) value->uses.push_back({node, i});
  return Status::ok();
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> map;
  std::unordered_map<const Node*, Node*> node_map;
  for (auto& v : values_) {
    Value* c = g->new_value(v->name);
    const int id = c->id;
    *c = *v;  // fields; the pointers into this graph are remapped below
    c->id = id;
    c->producer = nullptr;
    c->uses.clear();
    map[v.get()] = c;
  }
  g->next_value_id_ = next_value_id_;
  for (auto& n : nodes_) {
    auto c = std::make_unique<Node>();
    c->id = n->id;
    c->name = n->name;
    c->schema = n->schema;
    c->attrs = n->attrs ? n->attrs->clone() : nullptr;
    c->expected_input_types = n->expected_input_types;
    for (const Subgraph& sub : n->subgraphs) c->subgraphs.push_back({sub.name, sub.graph->clone()});
    for (Value* in : n->inputs) c->inputs.push_back(in ? map.at(in) : nullptr);
    for (Value* out : n->outputs) {
      Value* o = map.at(out);
      o->producer = c.get();
      c->outputs.push_back(o);
    }
    node_map[n.get()] = c.get();
    g->node_by_name_.emplace(c->name, c.get());
    g->nodes_.push_back(std::move(c));
  }
  g->next_node_id_ = next_node_id_;
  for (Value* v : inputs_) g->inputs_.push_back(map.at(v));
  for (Value* v : outputs_) g->outputs_.push_back(map.at(v));
  for (Value* v : captures_) g->captures_.push_back(map.at(v));
  // Uses in the same order as here, so passes see the same graph.
  for (auto& v : values_) {
    Value* c = map.at(v.get());
    c->uses.clear();
    for (const Use& u : v->uses) c->uses.push_back({node_map.at(u.node), u.input});
  }
  return g;
}

Status Graph::remove_node(Node* node) {
  for (Value* out : node->outputs) {
    if (!out->uses.empty())
      return invalid_argument("cannot remove: output '", out->name, "' is still used").with_node(node->context());
    if (std::find(outputs_.begin(), outputs_.end(), out) != outputs_.end())
      return invalid_argument("cannot remove: output '", out->name, "' is a graph output").with_node(node->context());
  }
  for (Value* in : node->inputs) {
    if (!in) continue;
    auto& uses = in->uses;
    uses.erase(std::remove_if(uses.begin(), uses.end(), [&](const Use& u) { return u.node == node; }), uses.end());
  }
  std::set<Value*> dead(node->outputs.begin(), node->outputs.end());
  for (Value* v : dead) forget_value(v);
  forget_node(node);
  values_.erase(std::remove_if(values_.begin(), values_.end(), [&](auto& v) { return dead.count(v.get()) > 0; }),
                values_.end());
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](auto& n) { return n.get() == node; }), nodes_.end());
  return Status::ok();
}

void Graph::remove_dead_nodes() {
  // Live: the producers the graph outputs reach; everything else goes in one sweep.
  std::unordered_set<const Node*> live;
  std::vector<Node*> stack;
  for (Value* out : outputs_)
    if (out->producer && live.insert(out->producer).second) stack.push_back(out->producer);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (Value* in : n->inputs)
      if (in && in->producer && live.insert(in->producer).second) stack.push_back(in->producer);
  }
  std::unordered_set<const Node*> dead_nodes;
  std::unordered_set<const Value*> dead_values;
  for (auto& n : nodes_) {
    if (live.count(n.get())) continue;
    dead_nodes.insert(n.get());
    for (Value* out : n->outputs) dead_values.insert(out);
  }
  if (!dead_nodes.empty()) {
    for (auto& v : values_) {
      auto& uses = v->uses;
      uses.erase(std::remove_if(uses.begin(), uses.end(), [&](const Use& u) { return dead_nodes.count(u.node) > 0; }),
                 uses.end());
    }
  }
  const std::unordered_set<const Value*> outputs(outputs_.begin(), outputs_.end());
  for (auto& v : values_)
    if (v->is_constant() && v->uses.empty() && !outputs.count(v.get())) dead_values.insert(v.get());
  for (auto& v : values_)
    if (dead_values.count(v.get())) forget_value(v.get());
  for (auto& n : nodes_)
    if (dead_nodes.count(n.get())) forget_node(n.get());
  values_.erase(std::remove_if(values_.begin(), values_.end(), [&](auto& v) { return dead_values.count(v.get()) > 0; }),
                values_.end());
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](auto& n) { return dead_nodes.count(n.get()) > 0; }),
               nodes_.end());
}

std::optional<double> Graph::fold_work(const Node& node) const {
  std::vector<const Tensor*> values;
  for (Value* in : node.inputs) {
    if (in && !in->value() && !node.schema->shape_only) return std::nullopt;
    values.push_back(in ? in->value() : nullptr);
  }
  std::vector<TensorDesc> outs;
  for (Value* out : node.outputs) outs.push_back(out->desc());
  return fold_cost(*node.schema, *node.attrs, values, outs);
}

FoldOutcome Graph::try_fold(Node* node, const FoldLimits& limits) {
  const ReferenceEvaluator* eval = reference_evaluator();
  if (!eval) return {};
  std::vector<Tensor> inputs;
  for (Value* in : node->inputs) {
    if (!in) {
      inputs.emplace_back();
      continue;
    }
    const Tensor* v = in->value();
    if (v) {
      inputs.push_back(*v);
    } else if (node->schema->shape_only && in->dims.is_static()) {
      static char unread;  // a shape-only op reads the dims, never the data
      inputs.push_back(Tensor::view(&unread, in->dtype, in->dims));
    } else {
      return {};
    }
  }
  size_t bytes = 0;
  for (Value* out : node->outputs) {
    if (!out->dims.is_static()) return {};
    double n = 1;  // in double: huge dims must not overflow
    for (int64_t d : out->dims) n *= static_cast<double>(d);
    if (n > static_cast<double>(limits.max_node_bytes)) return {};
    bytes += static_cast<size_t>(n) * dtype_size(out->dtype);
  }
  if (bytes > limits.max_node_bytes) return {};
  if (auto work = fold_work(*node); !work || *work > limits.max_work) {
    log_verbose("not folding '", node->name, "' (", node->op(), "): its estimated work ", work ? *work : -1.0,
                " is above the fold limit ", limits.max_work);
    return {};
  }
  auto outs = (*eval)(*node->schema, *node->attrs, std::move(inputs));
  if (!outs) {
    log_verbose("constant folding of '", node->name, "' failed: ", outs.status().message());
    return {false, outs.take_status()};
  }
  if (outs->size() != node->outputs.size()) return {};
  for (size_t i = 0; i < outs->size(); ++i) {
    if ((*outs)[i].dims() != node->outputs[i]->dims || (*outs)[i].dtype() != node->outputs[i]->dtype) return {};
  }
  for (size_t i = 0; i < outs->size(); ++i) node->outputs[i]->known_value = std::move((*outs)[i]);
  return {true, Status::ok()};
}

Status Graph::fold_known_values() {
  std::vector<Node*> folded;
  for (auto& n : nodes_)
    if (!n->outputs.empty() &&
        std::all_of(n->outputs.begin(), n->outputs.end(), [](Value* v) { return v->known_value.has_value(); }))
      folded.push_back(n.get());
  for (Node* n : folded) {
    for (Value* out : n->outputs) {
      const std::string name = out->name;
      KILN_RETURN_IF_ERROR(rename_value(out, name + "/folded-away"));
      KILN_ASSIGN_OR_RETURN(Value * c, add_constant(name, *out->known_value));
      c->dim_names = out->dim_names;
      c->type = out->type;
      replace_all_uses(out, c);
    }
  }
  remove_dead_nodes();
  return Status::ok();
}

Status Graph::infer_shapes() {
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, topological_order());
  for (Node* n : order) {
    KILN_ASSIGN_OR_RETURN(std::vector<TensorDesc> outs, infer_node(*n));
    if (outs.size() != n->outputs.size())
      return internal_error("inference gives ", outs.size(), " outputs for ", n->outputs.size())
          .with_node(n->context());
    for (size_t i = 0; i < outs.size(); ++i) {
      n->outputs[i]->dtype = outs[i].dtype;
      n->outputs[i]->kind = outs[i].kind;
      n->outputs[i]->dims = outs[i].dims;
    }
  }
  return Status::ok();
}

Status Graph::verify() const {
  std::vector<std::string> problems;
  auto problem = [&](const Status& s) { problems.push_back(s.to_string()); };
  std::set<std::string> names;
  std::set<const Value*> owned;
  for (auto& v : values_) {
    owned.insert(v.get());
    if (!names.insert(v->name).second) problems.push_back(str_cat("two values are named '", v->name, "'"));
    if (!v->producer && !v->is_graph_input && !v->is_constant() && !v->prepared_only && !v->is_capture)
      problems.push_back(str_cat("value '", v->name, "' has no producer and is neither an input nor a constant"));
  }
  for (Value* out : outputs_)
    if (!owned.count(out)) problems.push_back("a graph output is not a value of this graph");
  auto order = topological_order();
  if (!order) problem(order.status());
  for (auto& n : nodes_) {
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* in = n->inputs[i];
      if (!in) continue;
      if (!owned.count(in)) {
        problem(invalid_argument("input ", i, " refers to a value that is not in the graph").with_node(n->context()));
        continue;
      }
      if (i < n->expected_input_types.size() && n->expected_input_types[i] && in->type) {
        Status s = in->type->accepts_into(*n->expected_input_types[i]);
        if (!s.is_ok()) {
          const std::string producer =
              in->producer ? str_cat("node '", in->producer->name, "'") : str_cat("input '", in->name, "'");
          problem(invalid_argument(producer, " feeds port '", n->schema->input_name(static_cast<int>(i)),
                                   "': ", s.message())
                      .with_node(n->context()));
        }
      }
    }
    for (const Subgraph& sub : n->subgraphs) {
      if (!sub.graph) {
        problem(invalid_argument("subgraph '", sub.name, "' is missing").with_node(n->context()));
        continue;
      }
      for (Value* c : sub.graph->captures())
        if (std::none_of(n->inputs.begin(), n->inputs.end(), [&](Value* in) { return in && in->name == c->name; }))
          problem(invalid_argument("subgraph '", sub.name, "' captures '", c->name, "', which the node does not take")
                      .with_node(n->context()));
      Status s = sub.graph->verify();
      if (!s.is_ok()) problem(subgraph_error(*n, sub.name, s));
    }
    auto outs = infer_node(*n);
    if (!outs) {
      problem(outs.status());
      continue;
    }
    for (size_t i = 0; i < outs->size() && i < n->outputs.size(); ++i) {
      const Value* v = n->outputs[i];
      if ((*outs)[i].dtype != v->dtype || (*outs)[i].dims != v->dims || (*outs)[i].kind != v->kind)
        problem(invalid_argument("output '", v->name, "' is recorded as ", v->desc().to_string(),
                                 " but inference gives ", (*outs)[i].to_string())
                    .with_node(n->context()));
    }
  }
  if (problems.empty()) return Status::ok();
  std::string msg = str_cat("the graph has ", problems.size(), " problem", problems.size() > 1 ? "s" : "", ":");
  for (auto& p : problems) msg += "\n  " + p;
  return invalid_argument(msg);
}

std::string Graph::to_text(int indent) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string s = "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i) s += (i ? ", " : "") + inputs_[i]->to_string();
  s += ")\n";
  auto order = topological_order();
  const std::vector<Node*> nodes = order ? *order : this->nodes();
  for (Node* n : nodes) {
    s += pad + "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i) s += (i ? ", " : "") + n->outputs[i]->to_string();
    s += " = " + n->op() + "[" + n->name + "](";
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* in = n->inputs[i];
      s += i ? ", " : "";
      s += in ? (in->is_constant() ? "const " + in->name : in->name) : "-";
    }
    s += ")";
    const std::string a = n->attrs->to_string();
    if (!a.empty()) s += " {" + a + "}";
    s += "\n";
    for (const Subgraph& sub : n->subgraphs) s += pad + "    " + sub.name + ": " + sub.graph->to_text(indent + 4);
  }
  s += pad + "  return ";
  for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", " : "") + outputs_[i]->name;
  return s + "\n";
}

}  // namespace kiln
