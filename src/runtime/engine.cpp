#include "runtime/engine.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "graph/serialization.h"

namespace kiln {

Result<std::shared_ptr<const Engine>> Engine::deserialize(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(EngineContainer c, read_engine_container(bytes));
  auto engine = std::shared_ptr<Engine>(new Engine);
  engine->header_ = c.header;
  if (!c.sections.count("graph") || !c.sections.count("plan"))
    return invalid_argument("the engine lacks its graph or plan section; rebuild the engine");
  auto graph = deserialize_graph(c.sections["graph"]);
  if (!graph) return graph.take_status().with_prefix("engine graph");
  engine->graph_ = std::move(*graph);
  const auto plan = nlohmann::json::parse(c.sections["plan"], nullptr, false);
  if (plan.is_discarded() || !plan.is_array())
    return invalid_argument("the engine plan is corrupt; rebuild the engine");
  try {
    for (const auto& step : plan) {
      const std::string node_name = step.at("node"), kernel = step.at("kernel");
      Node* node = engine->graph_->find_node(node_name);
      if (!node) return invalid_argument("the engine plan names unknown node '", node_name, "'; rebuild the engine");
      const KernelImpl* impl = nullptr;
      for (const KernelImpl* k : KernelRegistry::global().all())
        if (k->name == kernel && k->op == node->op()) impl = k;
      if (!impl)
        return Status(StatusCode::kVersionMismatch,
                      str_cat("the engine uses kernel '", kernel, "' for node '", node_name,
                              "', which this kiln does not have; rebuild the engine"));
      engine->steps_.push_back({node, impl});
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("the engine plan is malformed (", e.what(), "); rebuild the engine");
  }
  if (engine->steps_.size() != engine->graph_->nodes().size())
    return invalid_argument("the engine plan covers ", engine->steps_.size(), " of ", engine->graph_->nodes().size(),
                            " nodes; rebuild the engine");
  return std::shared_ptr<const Engine>(engine);
}

std::vector<std::string> Engine::input_names() const {
  std::vector<std::string> out;
  for (Value* v : graph_->inputs()) out.push_back(v->name);
  return out;
}

std::vector<std::string> Engine::output_names() const {
  std::vector<std::string> out;
  for (Value* v : graph_->outputs()) out.push_back(v->name);
  return out;
}

std::string Engine::inspect() const {
  std::string s;
  for (const Step& st : steps_) s += str_cat(st.node->name, " (", st.node->op(), "): ", st.impl->name, "\n");
  return s;
}

Result<std::unique_ptr<ExecutionContext>> Engine::create_execution_context() const {
  return std::make_unique<ExecutionContext>(shared_from_this());
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

ExecutionContext::ExecutionContext(std::shared_ptr<const Engine> engine) : engine_(std::move(engine)) {
  for (const Engine::Step& st : engine_->steps()) {
    auto k = st.impl->create(build_time_call(*st.node));
    kernels_.push_back(k ? std::move(*k) : nullptr);
  }
  for (Value* v : engine_->graph().values())
    if (v->is_constant()) tensors_[v] = v->constant;
  // last_use_[s]: the intermediate values whose final reader is step s (never inputs, constants or outputs).
  const auto& steps = engine_->steps();
  last_use_.resize(steps.size());
  std::map<const Value*, size_t> last;
  for (size_t s = 0; s < steps.size(); ++s)
    for (Value* in : steps[s].node->inputs)
      if (in && in->producer) last[in] = s;
  for (size_t s = 0; s < steps.size(); ++s)
    for (Value* out : steps[s].node->outputs)
      if (!last.count(out)) last[out] = s;  // unread outputs go right away
  const auto& outs = engine_->graph().outputs();
  for (auto& [v, s] : last)
    if (std::find(outs.begin(), outs.end(), v) == outs.end()) last_use_[s].push_back(v);
}

Status ExecutionContext::set_input(const std::string& name, const Tensor& value) {
  const Value* in = nullptr;
  for (Value* v : engine_->graph().inputs())
    if (v->name == name) in = v;
  if (!in) {
    std::string names;
    for (auto& n : engine_->input_names()) names += (names.empty() ? "" : ", ") + n;
    return invalid_argument("the engine has no input '", name, "' (inputs: ", names, ")");
  }
  if (value.dtype() != in->dtype)
    return invalid_argument("input '", name, "' must be ", dtype_name(in->dtype), " but is ",
                            dtype_name(value.dtype()));
  if (value.rank() != in->dims.rank())
    return invalid_argument("input '", name, "' must have shape ", in->dims.to_string(), " but has ",
                            value.dims().to_string());
  for (int i = 0; i < value.rank(); ++i)
    if (in->dims[i] >= 0 && in->dims[i] != value.dims()[i])
      return invalid_argument("input '", name, "' must have shape ", in->dims.to_string(), " but has ",
                              value.dims().to_string(), " (dim ", i, " differs)");
  if (!value.device().is_cpu())
    return unsupported("input '", name, "': this engine runs on the CPU; give a host tensor");
  KILN_ASSIGN_OR_RETURN(tensors_[in], value.contiguous());
  return Status::ok();
}

Status ExecutionContext::execute(Stream& stream) {
  for (Value* v : engine_->graph().inputs())
    if (!tensors_.count(v)) return invalid_argument("input '", v->name, "' has not been set");
  const auto& steps = engine_->steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    const Node& node = *steps[s].node;
    if (!kernels_[s]) {
      auto k = steps[s].impl->create(build_time_call(node));
      if (!k) return k.take_status().with_node(node.context());
      kernels_[s] = std::move(*k);
    }
    OpCall call{node.schema, node.attrs.get(), {}, {}};
    std::vector<Tensor> src;
    std::vector<const Tensor*> values;
    src.reserve(node.inputs.size());
    for (Value* in : node.inputs) {
      if (!in) {
        call.inputs.push_back(TensorDesc::absent());
        src.emplace_back();
        continue;
      }
      const Tensor& t = tensors_.at(in);
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
      auto t = Tensor::empty(d.dtype, d.dims, cpu_allocator(), node.name);
      if (!t) return t.take_status().with_node(node.context());
      dst.push_back(std::move(*t));
    }
    KernelContext ctx{call, std::move(src), std::move(dst), stream, cpu_allocator()};
    Status st = kernels_[s]->run(ctx);
    if (!st.is_ok()) return std::move(st).with_node(node.context());
    for (size_t i = 0; i < node.outputs.size(); ++i) tensors_[node.outputs[i]] = std::move(ctx.dst[i]);
    // Intermediates are released after their last reader, so a run holds only what is still needed.
    for (const Value* v : last_use_[s]) tensors_.erase(v);
  }
  return stream.synchronize();
}

Result<Tensor> ExecutionContext::output(const std::string& name) const {
  for (Value* v : engine_->graph().outputs()) {
    if (v->name != name) continue;
    auto it = tensors_.find(v);
    if (it == tensors_.end()) return invalid_argument("output '", name, "' has not been computed: call execute first");
    return it->second;
  }
  return invalid_argument("the engine has no output '", name, "'");
}

}  // namespace kiln
