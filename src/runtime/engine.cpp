#include "runtime/engine.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/cuda_runtime.h"
#include "core/mapped_file.h"
#include "runtime/engine_file.h"

namespace kiln {

namespace {

// Numbers the graph's values and records, per step, the slots it reads and writes, the last reader
// of every slot and which intermediates each step is the last to read.
void assign_slots(GraphPlan& plan) {
  const Graph& g = *plan.graph;
  auto slot = [&](const Value* v) {
    auto [it, fresh] = plan.slot_of.try_emplace(v, plan.slot_count);
    if (fresh) {
      plan.value_of.push_back(v);
      ++plan.slot_count;
    }
    return it->second;
  };
  for (Value* v : g.inputs()) plan.input_slots.push_back(slot(v));
  for (Value* v : g.captures()) slot(v);
  for (Value* v : g.values())  // a prepared-only constant gets an undefined tensor: its readers hold its data
    if (v->is_constant() || v->prepared_only) plan.constants.emplace_back(slot(v), v->constant);
  for (PlanStep& st : plan.steps) {
    for (Value* in : st.node->inputs) st.in.push_back(in ? slot(in) : -1);
    for (Value* out : st.node->outputs) st.out.push_back(slot(out));
  }
  for (Value* v : g.outputs()) plan.output_slots.push_back(slot(v));
  const auto slots = static_cast<size_t>(plan.slot_count);
  plan.last_reader.assign(slots, -1);
  plan.read_by_host.assign(slots, 0);
  std::vector<int> producer(slots, -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& st = plan.steps[s];
    for (int i : st.in) {
      if (i < 0) continue;
      plan.last_reader[i] = static_cast<int>(s);
      if (!st.impl) plan.read_by_host[i] = 1;
    }
    for (int o : st.out) producer[o] = static_cast<int>(s);
  }
  // Intermediates are released after their last reader (unread ones right after their producer).
  plan.release.assign(plan.steps.size(), {});
  std::vector<char> is_output(slots, 0);
  for (int o : plan.output_slots) is_output[o] = 1;
  for (size_t i = 0; i < slots; ++i) {
    if (producer[i] < 0 || is_output[i]) continue;
    plan.release[std::max(plan.last_reader[i], producer[i])].push_back(static_cast<int>(i));
  }
}

// A constant stored without data (Value::prepared_only) may be read only by steps whose kernel takes it from
// their prepared data, and may not be an output.
Status check_prepared_only(const GraphPlan& plan) {
  auto missing = [](const Value& v, const std::string& reader) {
    return invalid_argument("the engine stores constant '", v.name, "' only as prepared data, but ", reader,
                            " needs it; rebuild the engine from the model");
  };
  for (const PlanStep& st : plan.steps)
    for (size_t k = 0; k < st.node->inputs.size(); ++k) {
      const Value* in = st.node->inputs[k];
      if (!in || !in->prepared_only) continue;
      if (!st.impl || st.impl->prepared_replaces_input != static_cast<int>(k) || !st.prepared.defined())
        return missing(*in,
                       str_cat("node '", st.node->name, "' (", st.impl ? st.impl->name : "host", ", input ", k, ")"));
    }
  for (const Value* out : plan.graph->outputs())
    if (out->prepared_only) return missing(*out, "the graph's output");
  return Status::ok();
}

bool has_prepared_only(const Graph& g) {
  for (const auto& v : g.values())
    if (v->prepared_only) return true;
  for (const auto& n : g.nodes())
    for (const Subgraph& sub : n->subgraphs)
      if (has_prepared_only(*sub.graph)) return true;
  return false;
}

// The plan of one graph; a node with subgraphs carries a plan per subgraph. Step ids number the
// steps of all plans of the engine.
Result<GraphPlan> read_plan(const nlohmann::json& json, const Graph& graph, const Tensor& prepared, int depth,
                            int& next_id) {
  if (!json.is_array() || depth > 64)
    return invalid_argument("the engine plan is corrupt; rebuild the engine from the model");
  GraphPlan plan;
  plan.graph = &graph;
  std::vector<char> seen(graph.nodes().size(), 0);
  std::unordered_map<const Node*, size_t> index;
  for (Node* n : graph.nodes()) index.emplace(n, index.size());
  for (const auto& step : json) {
    const std::string node_name = step.at("node"), kernel = step.at("kernel");
    Node* node = graph.find_node(node_name);
    if (!node)
      return invalid_argument("the engine plan names unknown node '", node_name,
                              "'; rebuild the engine from the model");
    if (seen[index.at(node)]++)
      return invalid_argument("the engine plan runs node '", node_name, "' twice; rebuild the engine from the model");
    const KernelImpl* impl = nullptr;
    if (kernel != "host") {
      for (const KernelImpl* k : KernelRegistry::global().all())
        if (k->name == kernel && k->op == node->op()) impl = k;
      if (!impl)
        return Status(StatusCode::kVersionMismatch,
                      str_cat("the engine uses kernel '", kernel, "' for node '", node_name,
                              "', which this kiln does not have; rebuild the engine from the model"));
    }
    PlanStep st;
    st.node = node;
    st.impl = impl;
    st.id = next_id++;
    if (step.contains("tactic")) st.tactic = step.at("tactic").get<std::string>();
    if (step.contains("prepared")) {
      const auto& at = step.at("prepared");
      const uint64_t offset = at.at(0).get<uint64_t>(), bytes = at.at(1).get<uint64_t>();
      const uint64_t section = prepared.defined() ? prepared.nbytes() : 0;
      if (!impl || bytes == 0 || offset % kEngineAlignment != 0 || offset > section || bytes > section - offset)
        return invalid_argument("the engine's prepared data for node '", node_name,
                                "' lies outside its section; rebuild the engine from the model");
      st.prepared = Tensor::view(const_cast<char*>(static_cast<const char*>(prepared.raw())) + offset, DataType::kUInt8,
                                 Dims{static_cast<int64_t>(bytes)});
    }
    const size_t subs = step.contains("subplans") ? step.at("subplans").size() : 0;
    if (subs != node->subgraphs.size())
      return invalid_argument("the engine plan of node '", node_name, "' has ", subs, " sub-plans for ",
                              node->subgraphs.size(), " subgraphs; rebuild the engine from the model");
    for (size_t i = 0; i < subs; ++i) {
      auto sub = read_plan(step.at("subplans")[i], *node->subgraphs[i].graph, prepared, depth + 1, next_id);
      if (!sub) return sub.take_status();
      st.subplans.push_back(std::move(*sub));
    }
    plan.steps.push_back(std::move(st));
  }
  if (plan.steps.size() != graph.nodes().size())
    return invalid_argument("the engine plan covers ", plan.steps.size(), " of ", graph.nodes().size(),
                            " nodes; rebuild the engine from the model");
  assign_slots(plan);
  KILN_RETURN_IF_ERROR(check_prepared_only(plan));
  return plan;
}

}  // namespace

Result<std::shared_ptr<const EngineImpl>> EngineImpl::deserialize(std::string_view bytes,
                                                                  std::shared_ptr<const void> storage) {
  KILN_ASSIGN_OR_RETURN(EngineFileContents c, read_engine_file(bytes, std::move(storage)));
  auto engine = std::shared_ptr<EngineImpl>(new EngineImpl);
  engine->header_ = std::move(c.header);
  engine->graph_ = std::move(c.graph);
  engine->prepared_ = std::move(c.prepared);
  engine->optimizer_ = std::move(c.optimizer);
  const auto plan = nlohmann::json::parse(c.plan, nullptr, false);
  if (plan.is_discarded() || !plan.is_array())
    return invalid_argument("the engine plan is corrupt; rebuild the engine from the model");
  try {
    KILN_ASSIGN_OR_RETURN(engine->plan_, read_plan(plan, *engine->graph_, engine->prepared_, 0, engine->step_count_));
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("the engine plan is malformed (", e.what(), "); rebuild the engine from the model");
  }
  if (auto it = engine->header_.extra.find("backend"); it != engine->header_.extra.end() && it->second == "cuda")
    engine->device_ = Device::cuda(0);
  if (engine->device_.is_cuda() && has_prepared_only(*engine->graph_))
    return invalid_argument(
        "the engine is for a GPU but stores constants only as prepared data, which only CPU "
        "engines do; rebuild the engine from the model");
  std::function<void(const GraphPlan&)> count = [&](const GraphPlan& p) {
    for (const PlanStep& st : p.steps) {
      if (engine->is_host_fallback(st)) ++engine->host_fallbacks_;
      for (const GraphPlan& sub : st.subplans) count(sub);
    }
  };
  count(engine->plan_);
  return std::shared_ptr<const EngineImpl>(engine);
}

Result<std::shared_ptr<const EngineImpl>> EngineImpl::load_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path, "engine"));
  auto engine = deserialize(file->bytes(), file);
  // The checksum read every page; what runs touches only what it uses (prepared weights, not the originals).
  if (engine) file->release_pages();
  return engine;
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
  for (const PlanStep& st : plan_.steps)
    s += str_cat(st.node->name, " (", st.node->op(), "): ", st.impl ? st.impl->name : "host",
                 st.tactic.empty() ? "" : "[" + st.tactic + "]", is_host_fallback(st) ? " (host fallback)" : "", "\n");
  return s;
}

Result<const std::vector<std::pair<int, Tensor>>*> EngineImpl::device_constants() const {
  std::lock_guard lock(upload_mu_);
  if (uploaded_) return &device_constants_;
  // Only constants a GPU step reads go up; the rest (read by host steps only) stay where they are.
  std::vector<char> read_on_gpu(static_cast<size_t>(plan_.slot_count), 0);
  for (const PlanStep& st : plan_.steps)
    if (st.impl && st.impl->backend == Backend::kCuda)
      for (int i : st.in)
        if (i >= 0) read_on_gpu[i] = 1;
  std::vector<std::pair<int, Tensor>> up;
  for (const auto& [slot, host] : plan_.constants) {
    if (!read_on_gpu[slot] || host.dtype() == DataType::kString) continue;
    // Engine weights live as long as the engine: they come from the device's plain allocator, not a cache.
    KILN_ASSIGN_OR_RETURN(Tensor c, host.contiguous());
    KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(c.dtype(), c.dims(), cuda::raw_device_allocator(device_.index),
                                                  "engine constant " + plan_.value_of[slot]->name));
    KILN_RETURN_IF_ERROR(cuda::copy(c, d));
    up.emplace_back(slot, std::move(d));
  }
  device_constants_ = std::move(up);
  uploaded_ = true;
  return &device_constants_;
}

Result<std::unique_ptr<ContextImpl>> EngineImpl::create_execution_context() const {
  return std::make_unique<ContextImpl>(shared_from_this());
}

}  // namespace kiln
