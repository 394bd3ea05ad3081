#include "builder/builder.h"

#include <algorithm>
#include <unordered_map>

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
#include "ops/convolution/convolution.h"

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

// What the chosen kernels prepare from their constants (weights in the library's layout), 64-byte aligned: the
// engine's prepared section, joined once at the end (no copies while it grows).
// Adds what the chosen kernel prepares to the prepared section; the step names where it is. Returns whether
// there was something to prepare.
Result<bool> add_prepared(const OpCall& call, const TacticChoice& choice, nlohmann::json& step,
                          SectionPieces& prepared) {
  if (!choice.impl->prepare) return false;
  OpCall with_tactic = call;
  with_tactic.tactic = choice.tactic;
  KILN_ASSIGN_OR_RETURN(Tensor blob, choice.impl->prepare(with_tactic));
  if (!blob.defined()) return false;
  const uint64_t bytes = blob.nbytes();
  step["prepared"] = {prepared.add(std::move(blob), 64), bytes};
  return true;
}

// Constants of one graph that steps read from their prepared data instead (KernelImpl::prepared_replaces_input):
// once every reader of a constant does, the engine stores it without its data (Value::prepared_only), and the
// build drops the data there and then (a packed copy does not sit next to the weights it was made from).
class PreparedOnly {
 public:
  PreparedOnly(const Graph& graph, bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    for (const auto& n : graph.nodes())
      for (Value* in : n->inputs)
        if (in && in->is_constant()) ++readers_[in];
    for (Value* out : graph.outputs()) readers_.erase(out);
  }

  // The step of `n` read its input `input` from its prepared data.
  void replaced(const Node& n, int input, BuildReport& rep) {
    if (!enabled_ || input < 0 || input >= static_cast<int>(n.inputs.size())) return;
    Value* v = n.inputs[input];
    auto it = v ? readers_.find(v) : readers_.end();
    if (it == readers_.end() || --it->second > 0) return;
    readers_.erase(it);
    rep.prepared_only_bytes += v->constant.nbytes();
    ++rep.prepared_only_constants;
    v->constant = Tensor();
    v->prepared_only = true;
  }

 private:
  bool enabled_;
  std::unordered_map<const Value*, int> readers_;  // constants (not graph outputs): readers left
};

// The pinned kernel of a node: the named implementation of its op and backend and one of its tactics, which
// must accept the node's problem (no timing, no fallback).
Result<TacticChoice> pinned_choice(const OpCall& call, const KernelPin& pin, Backend backend) {
  const KernelImpl* impl = nullptr;
  std::string known;
  for (const KernelImpl* k : KernelRegistry::global().all()) {
    if (k->op != call.schema->name) continue;
    known += str_cat(known.empty() ? "" : ", ", k->name);
    if (k->name == pin.impl) impl = k;
  }
  if (!impl)
    return invalid_argument("the pinned implementation '", pin.impl, "' is not one of ", call.schema->name, " (",
                            known.empty() ? "none registered" : known, ")");
  if (impl->backend == Backend::kCuda && backend != Backend::kCuda)
    return invalid_argument("the pinned implementation '", pin.impl, "' runs on CUDA but the engine is built for ",
                            backend_name(backend));
  if (Status ok = impl->supports(call); !ok.is_ok())
    return unsupported("the pinned implementation '", pin.impl, "' rejects ", call.schema->name, " ", call.to_string(),
                       ": ", ok.message());
  if (!pin.tactic.empty()) {
    const std::vector<std::string> tactics = impl->tactics ? impl->tactics(call) : std::vector<std::string>{};
    if (std::find(tactics.begin(), tactics.end(), pin.tactic) == tactics.end()) {
      std::string offered;
      for (const std::string& t : tactics) offered += str_cat(offered.empty() ? "" : ", ", t);
      return invalid_argument("the pinned implementation '", pin.impl, "' has no tactic '", pin.tactic,
                              "' for this problem (it offers: ", offered.empty() ? "only its default" : offered, ")");
    }
  }
  return TacticChoice{impl, pin.tactic, -1};
}

// What planning logs: the candidates and choices (verbose), and warnings.
struct PlanLogs {
  bool verbose = true;
  bool warnings = true;
};

// The plan of one graph: a kernel (and tactic) per node, a sub-plan per subgraph; failures name the subgraph path.
// Weights are prepared into `prepared` (none: not prepared).
Result<nlohmann::json> plan_graph(Graph& graph, const BuildOptions& options, TacticSearch& search, BuildReport& rep,
                                  std::vector<std::string>& failures, const std::string& path, SectionPieces* prepared,
                                  PlanLogs logs) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  // Only CPU engines: a GPU engine's host steps would need the weights uploaded or fetched.
  PreparedOnly prepared_only(graph, prepared && options.backend == Backend::kCpu);
  nlohmann::json plan = nlohmann::json::array();
  for (Node* n : order) {
    if (runs_on_host(*n)) {
      nlohmann::json step = {{"node", n->name}, {"kernel", "host"}};
      for (const Subgraph& sub : n->subgraphs) {
        KILN_ASSIGN_OR_RETURN(nlohmann::json subplan,
                              plan_graph(*sub.graph, options, search, rep, failures,
                                         path + n->name + "/" + sub.name + "/", prepared, logs));
        step["subplans"].push_back(subplan);
      }
      rep.choices.push_back(str_cat(path, n->name, " (", n->op(), "): host"));
      plan.push_back(step);
      continue;
    }
    OpCall call = node_call(*n);
    call.allow_tf32 = options.passes.precision.tf32;
    std::vector<std::string> log;
    // Pins name top-level nodes; a pinned node gets no timing and no fallback.
    const auto pin = path.empty() ? options.pinned.find(n->name) : options.pinned.end();
    const bool pinned = pin != options.pinned.end();
    auto choice = pinned ? pinned_choice(call, pin->second, options.backend) : choose_kernel(call, search, log);
    if (pinned && !choice) {
      failures.push_back(Status(choice.status()).with_node(n->context()).to_string());
      continue;
    }
    if (pinned && options.backend == Backend::kCuda && choice->impl->backend != Backend::kCuda) ++rep.host_fallbacks;
    // A CUDA build runs a node no CUDA kernel takes on the host: a CPU kernel, else the reference one.
    if (!choice && options.backend == Backend::kCuda) {
      if (auto cpu = KernelRegistry::global().select(call, Backend::kCpu)) {
        rep.warnings.push_back(str_cat(
            "node '", path, n->name, "' (", n->op(), ") has no CUDA kernel and runs on the host (", (*cpu)->name,
            "; its inputs are copied to the host and its outputs back): ", choice.status().message()));
        if (logs.warnings) log_warning(rep.warnings.back());
        choice = TacticChoice{*cpu, "", -1};
        ++rep.host_fallbacks;
      }
    }
    if (!choice && options.reference_fallback && options.backend != Backend::kRef) {
      auto ref = KernelRegistry::global().select(call, Backend::kRef);
      if (ref) {
        rep.warnings.push_back(
            str_cat("node '", n->name, "' (", n->op(), ") runs on the reference kernel: ", choice.status().message()));
        if (logs.warnings) log_warning(rep.warnings.back());
        choice = TacticChoice{*ref, "", -1};
        if (options.backend == Backend::kCuda) ++rep.host_fallbacks;
      }
    }
    if (!choice) {
      failures.push_back(path + Status(choice.status()).with_node(n->context()).to_string());
      continue;
    }
    if (logs.verbose)
      for (const std::string& line : log) log_verbose("builder: ", path, n->name, ": ", line);
    const std::string kernel =
        choice->tactic.empty() ? choice->impl->name : str_cat(choice->impl->name, "[", choice->tactic, "]");
    rep.choices.push_back(str_cat(path, n->name, " (", n->op(), "): ", kernel));
    if (logs.verbose)
      log_verbose("builder: ", rep.choices.back(), choice->ms >= 0 ? str_cat(" (", choice->ms, " ms)") : "");
    nlohmann::json step = {{"node", n->name}, {"kernel", choice->impl->name}};
    if (!choice->tactic.empty()) step["tactic"] = choice->tactic;
    if (choice->ms >= 0)
      rep.layers_ms += choice->ms;
    else
      ++rep.untimed_layers;
    if (!prepared) {
      plan.push_back(step);
      continue;
    }
    Result<bool> made = add_prepared(call, *choice, step, *prepared);
    if (!made)
      rep.warnings.push_back(str_cat("node '", n->name, "': weights not prepared at build time (",
                                     made.status().message(), "); they are prepared when the engine first runs"));
    else if (*made)
      prepared_only.replaced(*n, choice->impl->prepared_replaces_input, rep);
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

namespace {

// Builds from a graph the builder owns: the passes rewrite it in place, and it is released once serialized.
// The engine's header and sections, before they are written into one container.
struct BuiltSections {
  EngineHeader header;
  std::map<std::string, SectionPieces> sections;
};

// One way of laying out the graph: the optimized graph, its plan and prepared weights, and what happened.
struct Variant {
  std::unique_ptr<Graph> graph;
  nlohmann::json plan = nlohmann::json::array();
  SectionPieces prepared;
  BuildReport report;
  std::vector<std::string> failures;
};

// Runs the passes on `graph` (none: optimized already) and plans it into `v` (an empty one); weights are prepared
// only with `prepare` (a variant that may lose keeps no second copy of them).
Status plan_variant(std::unique_ptr<Graph> graph, const PassOptions* passes, const BuildOptions& options,
                    TacticSearch& search, bool prepare, PlanLogs logs, Variant& v) {
  if (passes) KILN_RETURN_IF_ERROR(run_passes(*graph, *passes, &v.report.optimizer));
  KILN_ASSIGN_OR_RETURN(
      v.plan, plan_graph(*graph, options, search, v.report, v.failures, "", prepare ? &v.prepared : nullptr, logs));
  v.graph = std::move(graph);
  return Status::ok();
}

bool has_convolution(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op() == "Convolution") return true;
  return false;
}

int blocked_convolutions(const Graph& g) {
  int count = 0;
  for (const auto& n : g.nodes())
    if (n->op() == "Convolution" && static_cast<const ConvolutionAttrs&>(*n->attrs).channel_block > 0) ++count;
  return count;
}

Result<BuiltSections> build_sections(std::unique_ptr<Graph> optimized, const BuildOptions& options,
                                     BuildReport* report) {
  BuildReport local;
  BuildReport& rep = report ? *report : local;
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
    pass_options.layout.matmul_weights_nk = true;
  }
  if (options.optimization_level < 0 || options.optimization_level > 5)
    return invalid_argument("the optimization level must be 0 to 5, not ", options.optimization_level);
  if (options.threads < 0)
    return invalid_argument("the thread count must be 0 (as set) or more, not ", options.threads);
  // Kernels are timed with the thread count the build was given; the caller's count is back when it returns.
  const CpuThreadsScope threads_scope(options.threads);
  // Reading the device name costs a look at /proc/cpuinfo or the driver: only when something is timed or cached.
  const bool times = options.optimization_level > 0 || options.workspace_limit > 0;
  TimingCache cache(times || !options.timing_cache_path.empty() ? timing_device(options.backend) : "");
  if (!options.timing_cache_path.empty()) KILN_RETURN_IF_ERROR(cache.load(options.timing_cache_path, rep.warnings));
  TacticSearch search;
  search.backend = options.backend;
  search.level = options.optimization_level;
  search.cache = &cache;
  search.device = cache.device();
  search.workspace_limit = options.workspace_limit;
  // Layout on the CPU, timed like a tactic: convolutions in channel blocks (oneDNN's nChw8c / nChw16c, every oneDNN
  // layer on its own layout: MobileNetV2's depthwise layers at batch 8 took 3.2 ms against 5.8 ms NHWC) or NHWC (kiln's
  // own Winograd and GEMM kernels: ResNet-50 at batch 8 took 547 ms against 684 ms in blocks). Both are planned, and
  // the one whose chosen kernels' timings sum to less is kept; without timing (level 0), or with the layout-blocked
  // pass off, NHWC.
  Variant chosen;
  const bool try_blocks = options.backend == Backend::kCpu && options.optimization_level > 0 &&
                          options.passes.enabled && !options.passes.disabled.count("layout-blocked") &&
                          has_convolution(*optimized);
  if (try_blocks) {
    // Channel blocks, then NHWC (the clones share the model's constants; blocks add none of their own, NHWC its
    // permuted weights), then the winner planned again with its weights prepared, without running the passes a
    // second time: its choices come from the timings just measured.
    PassOptions blocks = pass_options;
    // oneDNN's jit convolutions' own block: 16 channels on AVX-512 (there, blocks of 8 ran MobileNetV2 b1's layers
    // in 4.18 ms summed against 2.59 NHWC), 8 on AVX2.
    blocks.layout.channel_block = cpu_uses_avx512() ? 16 : 8;
    search.time_sole_candidate = true;
    const PlanLogs timing_logs{true, false};
    Variant blocked, nhwc;
    // Both layouts twice when the first look measured anything: the second measures each candidate again and keeps
    // the lower time, so that a burst of another process's work during one layout's timing (which once summed
    // ResNet-50 b1's NHWC layers to 41.6 ms against 19.5 undisturbed, and chose blocks) does not decide.
    for (int look = 0; look < 2; ++look) {
      if (look == 1 && search.measured.empty()) break;
      search.second_pass = look == 1;
      blocked = Variant{};
      nhwc = Variant{};  // the first look's permuted weights freed before the second looks at blocks
      KILN_RETURN_IF_ERROR(plan_variant(optimized->clone(), &blocks, options, search, false, timing_logs, blocked));
      KILN_RETURN_IF_ERROR(plan_variant(optimized->clone(), &pass_options, options, search, false, timing_logs, nhwc));
    }
    search.second_pass = false;
    optimized.reset();  // each variant holds what it reads
    const double nhwc_ms = nhwc.report.layers_ms;
    const int nhwc_untimed = nhwc.report.untimed_layers;
    const int in_blocks = blocked_convolutions(*blocked.graph);
    // The sums compare when the same number of layers is left out of each (not timed: dynamic shapes, the host).
    const bool comparable = blocked.report.untimed_layers == nhwc_untimed;
    const bool keep_blocks = in_blocks > 0 && blocked.failures.empty() && comparable &&
                             (!nhwc.failures.empty() || blocked.report.layers_ms < nhwc_ms);
    std::string line;
    if (in_blocks == 0)
      line = "NHWC (no convolution goes in channel blocks)";
    else if (!comparable)
      line = str_cat("NHWC (", blocked.report.untimed_layers, " layers in channel blocks and ", nhwc_untimed,
                     " NHWC could not be timed, so the layouts' times do not compare)");
    else
      line = str_cat(keep_blocks ? "channel blocks" : "NHWC", " (the layers' timings sum to ", blocked.report.layers_ms,
                     " ms with ", in_blocks, " convolutions in channel blocks, and ", nhwc_ms, " ms NHWC)");
    log_info("builder: layout: ", line);
    Variant& winner = keep_blocks ? blocked : nhwc;
    (keep_blocks ? nhwc : blocked).graph.reset();  // freed before the winner's weights are prepared
    KILN_RETURN_IF_ERROR(
        plan_variant(std::move(winner.graph), nullptr, options, search, true, PlanLogs{false, true}, chosen));
    chosen.report.optimizer = std::move(winner.report.optimizer);
    chosen.report.layout = line;
  } else {
    KILN_RETURN_IF_ERROR(plan_variant(std::move(optimized), &pass_options, options, search, true, PlanLogs{}, chosen));
  }
  rep.choices = std::move(chosen.report.choices);
  rep.warnings.insert(rep.warnings.end(), chosen.report.warnings.begin(), chosen.report.warnings.end());
  rep.host_fallbacks = chosen.report.host_fallbacks;
  rep.layers_ms = chosen.report.layers_ms;
  rep.layout = chosen.report.layout;
  rep.optimizer = std::move(chosen.report.optimizer);
  rep.prepared_only_constants = chosen.report.prepared_only_constants;
  rep.prepared_only_bytes = chosen.report.prepared_only_bytes;
  std::vector<std::string>& failures = chosen.failures;
  optimized = std::move(chosen.graph);
  const Graph& graph = *optimized;
  for (const auto& [name, pin] : options.pinned)
    if (!graph.find_node(name))
      return invalid_argument(
          "kernel pinned for node '", name, "' (", pin.impl, "), but the graph has no such node",
          options.passes.enabled ? " after the optimizer (it may have fused or renamed it; disable the passes)" : "");
  SectionPieces& prepared = chosen.prepared;
  nlohmann::json& plan = chosen.plan;
  rep.timed = search.timed;
  rep.cached = cache.reads();
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
  std::map<std::string, SectionPieces> sections;
  SerializedGraph parts = serialize_graph_parts(std::move(optimized));  // each constant freed once copied
  sections["graph"] = SectionPieces(std::move(parts.description));
  sections["weights"] = std::move(parts.weights);
  sections["plan"] = SectionPieces(plan.dump());
  if (prepared.bytes() > 0) sections["prepared"] = std::move(prepared);
  sections["optimizer"] = SectionPieces(optimizer_json(rep.optimizer).dump());
  return BuiltSections{std::move(header), std::move(sections)};
}

Result<std::string> build_owned(std::unique_ptr<Graph> optimized, const BuildOptions& options, BuildReport* report) {
  KILN_ASSIGN_OR_RETURN(BuiltSections built, build_sections(std::move(optimized), options, report));
  std::string out;
  KILN_RETURN_IF_ERROR(write_engine_container_to(built.header, std::move(built.sections), [&](uint64_t bytes) {
    out.resize(bytes);
    return out.data();
  }));
  return out;
}

}  // namespace

Result<std::string> build_engine(const Graph& graph, const BuildOptions& options, BuildReport* report) {
  KILN_RETURN_IF_ERROR(graph.verify());
  return build_owned(graph.clone(), options, report);
}

Result<std::string> build_engine(std::unique_ptr<Graph> graph, const BuildOptions& options, BuildReport* report) {
  if (!graph) return invalid_argument("build_engine: no graph");
  KILN_RETURN_IF_ERROR(graph->verify());
  return build_owned(std::move(graph), options, report);
}

Result<Tensor> build_engine_aligned(std::unique_ptr<Graph> graph, const BuildOptions& options, BuildReport* report) {
  if (!graph) return invalid_argument("build_engine: no graph");
  KILN_RETURN_IF_ERROR(graph->verify());
  KILN_ASSIGN_OR_RETURN(BuiltSections built, build_sections(std::move(graph), options, report));
  Tensor out;
  Status made = Status::ok();
  KILN_RETURN_IF_ERROR(write_engine_container_to(built.header, std::move(built.sections), [&](uint64_t bytes) -> char* {
    auto t = Tensor::empty(DataType::kUInt8, Dims{static_cast<int64_t>(bytes)});
    if (!t) {
      made = t.status();
      return nullptr;
    }
    out = std::move(*t);
    return static_cast<char*>(out.raw());
  }));
  KILN_RETURN_IF_ERROR(made);
  return out;
}

Result<std::string> build_engine(const Network& network, const BuildOptions& options, BuildReport* report) {
  return build_engine(network_graph(network), options, report);
}

}  // namespace kiln
