#include "runtime/engine.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "runtime/engine_file.h"

namespace kiln {

namespace {

// The steps of one graph's plan; a node with subgraphs carries a sub-plan per subgraph.
Result<std::vector<EngineImpl::Step>> read_plan(const nlohmann::json& plan, const Graph& graph, int depth) {
  if (!plan.is_array() || depth > 64)
    return invalid_argument("the engine plan is corrupt; rebuild the engine from the model");
  std::vector<EngineImpl::Step> steps;
  for (const auto& step : plan) {
    const std::string node_name = step.at("node"), kernel = step.at("kernel");
    Node* node = graph.find_node(node_name);
    if (!node)
      return invalid_argument("the engine plan names unknown node '", node_name,
                              "'; rebuild the engine from the model");
    const KernelImpl* impl = nullptr;
    if (kernel != "host") {
      for (const KernelImpl* k : KernelRegistry::global().all())
        if (k->name == kernel && k->op == node->op()) impl = k;
      if (!impl)
        return Status(StatusCode::kVersionMismatch,
                      str_cat("the engine uses kernel '", kernel, "' for node '", node_name,
                              "', which this kiln does not have; rebuild the engine from the model"));
    }
    EngineImpl::Step st{node, impl, {}};
    const size_t subs = step.contains("subplans") ? step.at("subplans").size() : 0;
    if (subs != node->subgraphs.size())
      return invalid_argument("the engine plan of node '", node_name, "' has ", subs, " sub-plans for ",
                              node->subgraphs.size(), " subgraphs; rebuild the engine from the model");
    for (size_t i = 0; i < subs; ++i) {
      auto sub = read_plan(step.at("subplans")[i], *node->subgraphs[i].graph, depth + 1);
      if (!sub) return sub.take_status();
      st.subplans.push_back(std::move(*sub));
    }
    steps.push_back(std::move(st));
  }
  if (steps.size() != graph.nodes().size())
    return invalid_argument("the engine plan covers ", steps.size(), " of ", graph.nodes().size(),
                            " nodes; rebuild the engine from the model");
  return steps;
}

}  // namespace

Result<std::shared_ptr<const EngineImpl>> EngineImpl::deserialize(std::string_view bytes,
                                                                  std::shared_ptr<const void> storage) {
  KILN_ASSIGN_OR_RETURN(EngineFileContents c, read_engine_file(bytes, std::move(storage)));
  auto engine = std::shared_ptr<EngineImpl>(new EngineImpl);
  engine->header_ = std::move(c.header);
  engine->graph_ = std::move(c.graph);
  const auto plan = nlohmann::json::parse(c.plan, nullptr, false);
  if (plan.is_discarded() || !plan.is_array())
    return invalid_argument("the engine plan is corrupt; rebuild the engine from the model");
  try {
    KILN_ASSIGN_OR_RETURN(engine->steps_, read_plan(plan, *engine->graph_, 0));
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("the engine plan is malformed (", e.what(), "); rebuild the engine from the model");
  }
  return std::shared_ptr<const EngineImpl>(engine);
}

Result<std::shared_ptr<const EngineImpl>> EngineImpl::load_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path, "engine"));
  return deserialize(file->bytes(), file);
}

std::vector<std::string> EngineImpl::input_names() const {
  std::vector<std::string> out;
  for (Value* v : graph_->inputs()) out.push_back(v->name);
  return out;
}

std::vector<std::string> EngineImpl::output_names() const {
  std::vector<std::string> out;
  for (Value* v : graph_->outputs()) out.push_back(v->name);
  return out;
}

std::string EngineImpl::inspect() const {
  std::string s;
  for (const Step& st : steps_)
    s += str_cat(st.node->name, " (", st.node->op(), "): ", st.impl ? st.impl->name : "host", "\n");
  return s;
}

Result<std::unique_ptr<ContextImpl>> EngineImpl::create_execution_context() const {
  return std::make_unique<ContextImpl>(shared_from_this());
}

}  // namespace kiln

namespace kiln {

namespace {
OpCall build_time_call(const Node& n) {
  OpCall call{n.schema, n.attrs.get(), {}, {}};
  for (Value* in : n.inputs) call.inputs.push_back(in ? in->desc() : TensorDesc::absent());
  for (Value* out : n.outputs) call.outputs.push_back(out->desc());
  std::vector<Tensor> unused;
  pad_optional_inputs(*n.schema, call.inputs, unused);
  return call;
}
}  // namespace

ContextImpl::ContextImpl(std::shared_ptr<const EngineImpl> engine) : engine_(std::move(engine)) {
  for (const EngineImpl::Step& st : engine_->steps()) {
    if (!st.impl) continue;
    auto k = st.impl->create(build_time_call(*st.node));
    if (k) kernels_[st.node] = std::move(*k);
  }
  for (Value* v : engine_->graph().values())
    if (v->is_constant()) values_[v] = RuntimeValue::of(v->constant);
}

const std::vector<std::vector<const Value*>>& ContextImpl::last_use(const Graph& graph,
                                                                    const std::vector<EngineImpl::Step>& steps) {
  auto it = last_use_.find(&graph);
  if (it != last_use_.end()) return it->second;
  // [s]: the intermediate values whose final reader is step s (never inputs, constants or outputs).
  std::vector<std::vector<const Value*>> out(steps.size());
  std::map<const Value*, size_t> last;
  for (size_t s = 0; s < steps.size(); ++s)
    for (Value* in : steps[s].node->inputs)
      if (in && in->producer) last[in] = s;
  for (size_t s = 0; s < steps.size(); ++s)
    for (Value* out_v : steps[s].node->outputs)
      if (!last.count(out_v)) last[out_v] = s;  // unread outputs go right away
  const auto& outs = graph.outputs();
  for (auto& [v, s] : last)
    if (std::find(outs.begin(), outs.end(), v) == outs.end()) out[s].push_back(v);
  return last_use_[&graph] = std::move(out);
}

Status ContextImpl::set_input(const std::string& name, Tensor value) {
  return set_input_value(name, RuntimeValue::of(std::move(value)));
}

Status ContextImpl::set_input_value(const std::string& name, RuntimeValue value) {
  const Value* in = nullptr;
  for (Value* v : engine_->graph().inputs())
    if (v->name == name) in = v;
  if (!in) {
    std::string names;
    for (auto& n : engine_->input_names()) names += (names.empty() ? "" : ", ") + n;
    return invalid_argument("the engine has no input '", name, "' (inputs: ", names, ")");
  }
  if (value.kind != in->kind)
    return invalid_argument("input '", name, "' must be a ", value_kind_name(in->kind), " but is a ",
                            value_kind_name(value.kind));
  if (in->kind != ValueKind::kTensor) {
    for (const Tensor& t : value.items)
      if (t.dtype() != in->dtype || !t.device().is_cpu())
        return invalid_argument("input '", name, "' must hold host ", dtype_name(in->dtype), " tensors");
    values_[in] = std::move(value);
    return Status::ok();
  }
  const Tensor& t = value.tensor;
  if (t.dtype() != in->dtype)
    return invalid_argument("input '", name, "' must be ", dtype_name(in->dtype), " but is ", dtype_name(t.dtype()));
  if (t.rank() != in->dims.rank())
    return invalid_argument("input '", name, "' must have shape ", in->dims.to_string(), " but has ",
                            t.dims().to_string());
  for (int i = 0; i < t.rank(); ++i)
    if (in->dims[i] >= 0 && in->dims[i] != t.dims()[i])
      return invalid_argument("input '", name, "' must have shape ", in->dims.to_string(), " but has ",
                              t.dims().to_string(), " (dim ", i, " differs)");
  if (!t.device().is_cpu()) return unsupported("input '", name, "': this engine runs on the CPU; give a host tensor");
  KILN_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
  values_[in] = RuntimeValue::of(std::move(c));
  return Status::ok();
}

Status ContextImpl::run_kernel(const EngineImpl::Step& step, Scope& scope, Stream& stream) {
  const Node& node = *step.node;
  auto& kernel = kernels_[&node];
  if (!kernel) {
    auto k = step.impl->create(build_time_call(node));
    if (!k) return k.take_status().with_node(node.context());
    kernel = std::move(*k);
  }
  OpCall call{node.schema, node.attrs.get(), {}, {}};
  std::vector<Tensor> src;
  std::vector<const Tensor*> values;
  for (Value* in : node.inputs) {
    if (!in) {
      call.inputs.push_back(TensorDesc::absent());
      src.emplace_back();
      continue;
    }
    auto it = scope.find(in);
    if (it == scope.end()) return internal_error("input '", in->name, "' has no value").with_node(node.context());
    if (it->second.kind != ValueKind::kTensor)
      return invalid_argument("input '", in->name, "' is a ", value_kind_name(it->second.kind), "; a tensor is needed")
          .with_node(node.context());
    const Tensor& t = it->second.tensor;
    call.inputs.push_back({t.dtype(), t.dims(), true});
    src.push_back(t);
  }
  values.reserve(src.size());
  for (const Tensor& t : src) values.push_back(t.defined() ? &t : nullptr);
  auto outs = node.schema->infer_outputs(InferContext(*node.attrs, call.inputs, values));
  if (!outs) return outs.take_status().with_node(node.context());
  call.outputs = *outs;
  pad_optional_inputs(*node.schema, call.inputs, src);
  std::vector<Tensor> dst;
  for (const TensorDesc& d : call.outputs) {
    if (!d.dims.is_static())
      return internal_error("output shape ", d.dims.to_string(), " is still unknown at run time")
          .with_node(node.context());
    auto t = Tensor::empty(d.dtype, d.dims, *allocator_, node.name);
    if (!t) return t.take_status().with_node(node.context());
    dst.push_back(std::move(*t));
  }
  KernelContext ctx{call, std::move(src), std::move(dst), stream, *allocator_};
  Status st = kernel->run(ctx);
  if (!st.is_ok()) return std::move(st).with_node(node.context());
  for (size_t i = 0; i < node.outputs.size(); ++i) scope[node.outputs[i]] = RuntimeValue::of(std::move(ctx.dst[i]));
  return Status::ok();
}

Status ContextImpl::run_plan(const Graph& graph, const std::vector<EngineImpl::Step>& steps, Scope& scope,
                             Stream& stream, int depth) {
  const auto& release = last_use(graph, steps);
  const bool timed = layer_timer_ && depth == 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Status st =
        steps[s].impl ? run_kernel(steps[s], scope, stream) : run_host_op(*this, steps[s], scope, stream, depth);
    if (!st.is_ok()) return st;
    if (timed) {
      KILN_RETURN_IF_ERROR(stream.synchronize());
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      layer_timer_(steps[s].node->name, steps[s].impl ? std::string_view(steps[s].impl->name) : "host", ms);
    }
    // Intermediates are released after their last reader, so a run holds only what is still needed.
    for (const Value* v : release[s]) scope.erase(v);
  }
  return Status::ok();
}

Result<std::vector<RuntimeValue>> ContextImpl::call_subgraph(const EngineImpl::Step& step, size_t sub,
                                                             const Scope& scope, std::vector<RuntimeValue> args,
                                                             Stream& stream, int depth) {
  const Node& owner = *step.node;
  const Subgraph& sg = owner.subgraphs.at(sub);
  const Graph& g = *sg.graph;
  auto fail = [&](const Status& s) { return subgraph_error(owner, sg.name, s); };
  if (depth > 64) return fail(invalid_argument("subgraphs nest too deeply"));
  Scope local;
  for (Value* v : g.values())
    if (v->is_constant()) local[v] = RuntimeValue::of(v->constant);
  for (Value* c : g.captures()) {
    const Value* outer = nullptr;
    for (Value* in : owner.inputs)
      if (in && in->name == c->name) outer = in;
    auto it = outer ? scope.find(outer) : scope.end();
    if (it == scope.end()) return fail(internal_error("captured value '", c->name, "' has no value"));
    local[c] = it->second;
  }
  if (args.size() != g.inputs().size())
    return fail(internal_error("the subgraph takes ", g.inputs().size(), " inputs but gets ", args.size()));
  for (size_t i = 0; i < args.size(); ++i) local[g.inputs()[i]] = std::move(args[i]);
  Status s = run_plan(g, step.subplans.at(sub), local, stream, depth + 1);
  if (!s.is_ok()) return fail(s);
  std::vector<RuntimeValue> out;
  for (Value* v : g.outputs()) {
    auto it = local.find(v);
    if (it == local.end()) return fail(internal_error("output '", v->name, "' was not computed"));
    out.push_back(it->second);
  }
  return out;
}

Status ContextImpl::execute(Stream& stream) {
  for (Value* v : engine_->graph().inputs())
    if (!values_.count(v)) return invalid_argument("input '", v->name, "' has not been set");
  Scope scope = values_;  // inputs and constants; intermediates live only during the run
  KILN_RETURN_IF_ERROR(run_plan(engine_->graph(), engine_->steps(), scope, stream, 0));
  for (Value* v : engine_->graph().outputs())
    if (auto it = scope.find(v); it != scope.end()) values_[v] = it->second;
  return stream.synchronize();
}

Result<RuntimeValue> ContextImpl::output_value(const std::string& name) const {
  for (Value* v : engine_->graph().outputs()) {
    if (v->name != name) continue;
    auto it = values_.find(v);
    if (it == values_.end()) return invalid_argument("output '", name, "' has not been computed: call execute first");
    return it->second;
  }
  return invalid_argument("the engine has no output '", name, "'");
}

Result<Tensor> ContextImpl::output(const std::string& name) const {
  KILN_ASSIGN_OR_RETURN(RuntimeValue v, output_value(name));
  if (v.kind != ValueKind::kTensor)
    return invalid_argument("output '", name, "' is a ", value_kind_name(v.kind), "; read it with output_value");
  return v.tensor;
}

}  // namespace kiln
