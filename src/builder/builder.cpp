#include "builder/builder.h"

#include <nlohmann/json.hpp>

#include "builder/tactics.h"
#include "core/cuda_runtime.h"
#include "graph/engine_format.h"
#include "graph/network/network_internal.h"
#include "graph/serialization.h"
#include "kernels/cpu/threads.h"
#include "kernels/libraries.h"
#include "kiln/logger.h"
#include "kiln/version.h"

namespace kiln {

OpCall node_call(const Node& n) {
  OpCall call{n.schema, n.attrs.get(), {}, {}};
  for (Value* in : n.inputs) {
    call.inputs.push_back(in ? in->desc() : TensorDesc::absent());
    call.constants.push_back(in && in->is_constant() ? &in->constant : nullptr);
  }
  for (Value* out : n.outputs) call.outputs.push_back(out->desc());
  std::vector<Tensor> unused;
  pad_optional_inputs(*n.schema, call.inputs, unused);
  call.constants.resize(call.inputs.size(), nullptr);
  return call;
}

namespace {
// Host ops (control flow, sequences, optionals, and Identity of one) are run by the runtime itself.
bool runs_on_host(const Node& n) {
  return n.schema->host || (n.op() == "Identity" && n.inputs.size() == 1 && n.inputs[0] &&
                            (n.inputs[0]->kind != ValueKind::kTensor || n.inputs[0]->dtype == DataType::kString));
}

// The plan of one graph: a kernel (and tactic) per node, a sub-plan per subgraph; failures name the subgraph path.
// Appends what the chosen kernel prepares from its constants (its weights in the library's layout) to the
// engine's prepared section, 64-byte aligned; the step names where it is.
Status add_prepared(const OpCall& call, const TacticChoice& choice, nlohmann::json& step, std::string& prepared) {
  if (!choice.impl->prepare) return Status::ok();
  OpCall with_tactic = call;
  with_tactic.tactic = choice.tactic;
  KILN_ASSIGN_OR_RETURN(Tensor blob, choice.impl->prepare(with_tactic));
  if (!blob.defined()) return Status::ok();
  prepared.resize((prepared.size() + 63) / 64 * 64, '\0');
  step["prepared"] = {prepared.size(), blob.nbytes()};
  prepared.append(static_cast<const char*>(blob.raw()), blob.nbytes());
  return Status::ok();
}

Result<nlohmann::json> plan_graph(const Graph& graph, const BuildOptions& options, TacticSearch& search,
                                  BuildReport& rep, std::vector<std::string>& failures, const std::string& path,
                                  std::string& prepared) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  nlohmann::json plan = nlohmann::json::array();
  for (Node* n : order) {
    if (runs_on_host(*n)) {
      nlohmann::json step = {{"node", n->name}, {"kernel", "host"}};
      for (const Subgraph& sub : n->subgraphs) {
        KILN_ASSIGN_OR_RETURN(nlohmann::json subplan, plan_graph(*sub.graph, options, search, rep, failures,
                                                                 path + n->name + "/" + sub.name + "/", prepared));
        step["subplans"].push_back(subplan);
      }
      rep.choices.push_back(str_cat(path, n->name, " (", n->op(), "): host"));
      plan.push_back(step);
      continue;
    }
    OpCall call = node_call(*n);
    call.allow_tf32 = options.passes.precision.tf32;
    std::vector<std::string> log;
    auto choice = choose_kernel(call, search, log);
    // A CUDA build runs a node no CUDA kernel takes on the host: a CPU kernel, else the reference one.
    if (!choice && options.backend == Backend::kCuda) {
      if (auto cpu = KernelRegistry::global().select(call, Backend::kCpu)) {
        rep.warnings.push_back(str_cat(
            "node '", path, n->name, "' (", n->op(), ") has no CUDA kernel and runs on the host (", (*cpu)->name,
            "; its inputs are copied to the host and its outputs back): ", choice.status().message()));
        log_warning(rep.warnings.back());
        choice = TacticChoice{*cpu, "", -1};
        ++rep.host_fallbacks;
      }
    }
    if (!choice && options.reference_fallback && options.backend != Backend::kRef) {
      auto ref = KernelRegistry::global().select(call, Backend::kRef);
      if (ref) {
        rep.warnings.push_back(
            str_cat("node '", n->name, "' (", n->op(), ") runs on the reference kernel: ", choice.status().message()));
        log_warning(rep.warnings.back());
        choice = TacticChoice{*ref, "", -1};
        if (options.backend == Backend::kCuda) ++rep.host_fallbacks;
      }
    }
    if (!choice) {
      failures.push_back(path + Status(choice.status()).with_node(n->context()).to_string());
      continue;
    }
    for (const std::string& line : log) log_verbose("builder: ", path, n->name, ": ", line);
    const std::string kernel =
        choice->tactic.empty() ? choice->impl->name : str_cat(choice->impl->name, "[", choice->tactic, "]");
    rep.choices.push_back(str_cat(path, n->name, " (", n->op(), "): ", kernel));
    log_verbose("builder: ", rep.choices.back(), choice->ms >= 0 ? str_cat(" (", choice->ms, " ms)") : "");
    nlohmann::json step = {{"node", n->name}, {"kernel", choice->impl->name}};
    if (!choice->tactic.empty()) step["tactic"] = choice->tactic;
    if (Status st = add_prepared(call, *choice, step, prepared); !st.is_ok())
      rep.warnings.push_back(str_cat("node '", n->name, "': weights not prepared at build time (", st.message(),
                                     "); they are prepared when the engine first runs"));
    plan.push_back(step);
  }
  return plan;
}

nlohmann::json optimizer_json(const OptimizerReport& r) {
  nlohmann::json j = {
      {"nodes_before", r.nodes_before}, {"nodes_after", r.nodes_after}, {"applied", r.applied}, {"refused", r.refused}};
  for (const PassRecord& p : r.passes) j["passes"].push_back({{"pass", p.pass}, {"changes", p.changes}, {"ms", p.ms}});
  return j;
}

}  // namespace

BackendHook backend_hook(Backend backend) {
  return [backend](const Node& n) -> Status {
    if (runs_on_host(n)) return Status::ok();
    auto impl = KernelRegistry::global().select(node_call(n), backend);
    return impl ? Status::ok() : impl.take_status();
  };
}

Result<std::string> build_engine(const Graph& input_graph, const BuildOptions& options, BuildReport* report) {
  KILN_RETURN_IF_ERROR(input_graph.verify());
  BuildReport local;
  BuildReport& rep = report ? *report : local;
  std::unique_ptr<Graph> optimized = input_graph.clone();
  PassOptions pass_options = options.passes;
  pass_options.backend = backend_hook(options.backend);
  pass_options.precision.prefer_fp16 = options.backend == Backend::kCuda;
  // cuDNN's tensor-core convolutions want NHWC (float16/bfloat16, batch >= 8); oneDNN's NHWC kernels (brgemm
  // convolutions, depthwise, pooling) run float32 activations channels-last from layer to layer on the CPU, where
  // NCHW would cost a reorder into oneDNN's layout and back around every convolution.
  if (options.backend == Backend::kCuda) {
    pass_options.layout.channels_last = true;
    pass_options.layout.reduced_precision_only = true;
    pass_options.layout.min_batch = 8;
  } else if (options.backend == Backend::kCpu) {
    pass_options.layout.channels_last = true;
    pass_options.layout.pooling_joins_only = true;
  }
  KILN_RETURN_IF_ERROR(run_passes(*optimized, pass_options, &rep.optimizer));
  const Graph& graph = *optimized;
  std::vector<std::string> failures;
  if (options.optimization_level < 0 || options.optimization_level > 5)
    return invalid_argument("the optimization level must be 0 to 5, not ", options.optimization_level);
  if (options.threads < 0)
    return invalid_argument("the thread count must be 0 (as set) or more, not ", options.threads);
  if (options.threads > 0) set_cpu_threads(options.threads);
  TimingCache cache(timing_device(options.backend));
  if (!options.timing_cache_path.empty()) KILN_RETURN_IF_ERROR(cache.load(options.timing_cache_path, rep.warnings));
  TacticSearch search;
  search.backend = options.backend;
  search.level = options.optimization_level;
  search.cache = &cache;
  search.device = cache.device();
  search.workspace_limit = options.workspace_limit;
  std::string prepared;
  KILN_ASSIGN_OR_RETURN(nlohmann::json plan, plan_graph(graph, options, search, rep, failures, "", prepared));
  rep.timed = search.timed;
  rep.cached = search.cached;
  rep.timing_ms = search.timing_ms;
  if (!options.timing_cache_path.empty() && search.timed > 0)
    KILN_RETURN_IF_ERROR(cache.save(options.timing_cache_path));
  if (!failures.empty()) {
    std::string msg = str_cat(failures.size(), " node", failures.size() > 1 ? "s" : "", " cannot run on ",
                              backend_name(options.backend), ":");
    for (auto& f : failures) msg += "\n  " + f;
    return unsupported(msg);
  }
  EngineHeader header;
  header.kiln_version = version_string();
  header.device = "cpu";
  header.cpu_isa = cpu_isa_name();
  if (options.backend == Backend::kCuda) {  // engines for a GPU are for that GPU's name and compute capability
    const cuda::RuntimeInfo rt = cuda::query_runtime();
    if (rt.gpus.empty()) return unsupported("cannot build a CUDA engine: ", rt.problem);
    header.device = rt.gpus.front().name;
    header.compute_capability = str_cat(rt.gpus.front().cc_major, ".", rt.gpus.front().cc_minor);
    header.cpu_isa.clear();
  }
  for (auto& f : build_flags()) header.build_flags += (header.build_flags.empty() ? "" : " ") + f;
  header.extra = options.header_extra;
  header.extra["backend"] = std::string(backend_name(options.backend));
  std::map<std::string, std::string> sections;
  SerializedGraph parts = serialize_graph_parts(graph);
  sections["graph"] = std::move(parts.description);
  sections["weights"] = std::move(parts.weights);
  sections["plan"] = plan.dump();
  if (!prepared.empty()) sections["prepared"] = std::move(prepared);
  sections["optimizer"] = optimizer_json(rep.optimizer).dump();
  return write_engine_container(header, sections);
}

Result<std::string> build_engine(const Network& network, const BuildOptions& options, BuildReport* report) {
  return build_engine(network_graph(network), options, report);
}

}  // namespace kiln
