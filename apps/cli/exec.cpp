#include "exec.h"

#include <malloc.h>

#include "exec_cuda.h"
#include "exec_profiles.h"
#include "profile.h"
#include "run_inputs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "builder/builder.h"
#include "core/cuda_runtime.h"
#include "kernels/cpu/threads.h"
#include "kiln/logger.h"
#include "kiln/strings.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "runtime/engine.h"
#include "runtime/inspector.h"

namespace kiln::cli {

int exec_fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.to_string().c_str());
  std::printf("&&&& FAILED kiln exec\n");
  return 1;
}

namespace {

using Clock = std::chrono::steady_clock;

int fail(const Status& s) { return exec_fail(s); }

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank)), hi = static_cast<size_t>(std::ceil(rank));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace

std::string stats_line(const char* what, std::vector<double> v, const std::vector<double>& percentiles) {
  std::sort(v.begin(), v.end());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  std::string line = str_cat(what, ": min = ", v.front(), " ms, max = ", v.back(), " ms, mean = ", mean,
                             " ms, median = ", percentile(v, 50), " ms");
  for (double p : percentiles) line += str_cat(", percentile(", p, "%) = ", percentile(v, p), " ms");
  return line;
}

namespace {

nlohmann::json tensor_json(const std::string& name, const Tensor& t) {
  nlohmann::json values = nlohmann::json::array();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DataType::kString)
      values.push_back(std::string(string_at(t, i)));
    else if (t.dtype() == DataType::kInt64)
      values.push_back(t.data<int64_t>()[i]);
    else
      values.push_back(t.at(i));
  }
  return {{"name", name}, {"dtype", dtype_name(t.dtype())}, {"dimensions", t.dims().to_vector()}, {"values", values}};
}

// trtexec's --memPoolSize: "workspace:SIZE", SIZE in MiB or with a suffix B, K, M or G.
Result<uint64_t> workspace_limit(const std::string& spec) {
  const auto bad = [&] {
    return invalid_argument("--memPoolSize '", spec, "': give workspace:SIZE, e.g. workspace:64M (K, M, G or B)");
  };
  constexpr std::string_view kPrefix = "workspace:";
  if (spec.rfind(kPrefix, 0) != 0) return bad();
  const std::string size = spec.substr(kPrefix.size());
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(size, &used);
  } catch (const std::exception&) {
    return bad();
  }
  const std::string unit = size.substr(used);
  double scale = 1 << 20;
  if (unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = 1 << 10;
  else if (unit == "G")
    scale = 1 << 30;
  else if (!unit.empty() && unit != "M")
    return bad();
  if (!(value >= 0) || value * scale > 1e18) return bad();
  return static_cast<uint64_t>(value * scale);
}

// "conv1:fp16" -> {"conv1", float16}; the name may itself hold ':' (the last one splits).
Result<std::pair<std::string, DataType>> layer_precision(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  const std::string name = colon == std::string::npos ? "" : spec.substr(0, colon);
  const std::string p = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const DataType t = p == "fp32" ? DataType::kFloat32 : p == "fp16" ? DataType::kFloat16 : DataType::kBFloat16;
  if (name.empty() || (p != "fp32" && p != "fp16" && p != "bf16"))
    return invalid_argument("--layerPrecisions '", spec, "': give layerName:fp32, layerName:fp16 or layerName:bf16");
  return std::make_pair(name, t);
}

// "[I] Optimizer: 122 -> 73 layers (conv-activation 33, conv-elementwise 16)"; each rewrite at --verbose.
void print_optimizer_report(const OptimizerReport& r) {
  std::string counts;
  for (const PassRecord& p : r.passes)
    if (p.changes > 0) counts += str_cat(counts.empty() ? "" : ", ", p.pass, " ", p.changes);
  std::printf("[I] Optimizer: %zu -> %zu layers%s%s%s\n", r.nodes_before, r.nodes_after, counts.empty() ? "" : " (",
              counts.c_str(), counts.empty() ? "" : ")");
  if (!r.refused.empty()) std::printf("[I] Optimizer: %zu rewrites refused (--verbose says why)\n", r.refused.size());
  if (Logger::global().level() >= Severity::kVerbose)
    for (const PassRecord& p : r.passes)
      std::printf("[V] optimizer pass %-22s %3d changes %8.2f ms (--disable-pass %s)\n", p.pass.c_str(), p.changes,
                  p.ms, p.pass.c_str());
}
}  // namespace

int run_exec(const ExecOptions& opt) {
  std::printf("&&&& RUNNING kiln exec\n");
  if (opt.onnx.empty() == opt.load_engine.empty())
    return fail(invalid_argument("give --onnx MODEL or --loadEngine FILE"));
  if (opt.iterations < 1 || opt.duration_s < 0 || opt.warm_up_ms < 0 || opt.avg_runs < 1 || opt.threads < 0)
    return fail(invalid_argument("--iterations and --avgRuns must be >= 1, --duration, --warmUp and --threads >= 0"));
  for (double p : opt.percentiles)
    if (!(p >= 0 && p <= 100)) return fail(invalid_argument("--percentile ", p, " is not in [0, 100]"));
  if (opt.tf32 && opt.no_tf32) return fail(invalid_argument("--tf32 and --noTF32 contradict each other; give one"));
  // The device: asked for, else the GPU when one answers and kiln has CUDA.
  const cuda::RuntimeInfo rt = cuda::query_runtime();
  if (!opt.device.empty() && opt.device != "cuda" && opt.device != "cpu")
    return fail(invalid_argument("--device '", opt.device, "': give cuda or cpu"));
  if (opt.device == "cuda" && rt.gpus.empty())
    return fail(Status(StatusCode::kDeviceError, str_cat("--device cuda: ", rt.problem, "; use --device cpu")));
  const bool gpu = opt.device == "cuda" || (opt.device.empty() && !rt.gpus.empty());
  if (gpu)
    std::printf("[I] Device: cuda:0 (%s, compute capability %d.%d)%s\n", rt.gpus.front().name.c_str(),
                rt.gpus.front().cc_major, rt.gpus.front().cc_minor, opt.device.empty() ? ", the default" : "");
  else
    std::printf("[I] Device: cpu%s\n", opt.device.empty() ? str_cat(" (the default: ", rt.problem, ")").c_str() : "");
  if (!gpu && (opt.use_cuda_graph || opt.no_data_transfers || opt.streams != 1))
    std::printf("[W] --useCudaGraph, --noDataTransfers and --streams apply to GPU engines only; ignored on the CPU\n");
  std::shared_ptr<const Tensor> built_engine;  // the engine built from --onnx, in aligned memory used in place
  if (!opt.onnx.empty()) {
    std::printf("=== Build ===\n[I] Importing %s\n", opt.onnx.c_str());
    const auto t0 = Clock::now();
    onnx_import::ImportOptions import_opt;
    import_opt.external_data_root = opt.external_data_root;
    auto model = onnx_import::import_file(opt.onnx, import_opt);
    if (!model) return fail(model.status());
    for (const auto& w : model->warnings) std::printf("[W] %s\n", w.c_str());
    std::printf("[I] Imported %zu nodes in %.1f ms; building a %s engine\n", model->graph->nodes().size(), ms_since(t0),
                gpu ? "CUDA" : "CPU");
    const auto t1 = Clock::now();
    BuildReport report;
    BuildOptions build_opt;
    build_opt.backend = gpu ? Backend::kCuda : Backend::kCpu;
    build_opt.optimization_level = opt.optimization_level;
    build_opt.timing_cache_path = opt.timing_cache;
    for (const std::string& name : opt.disable_passes) {
      if (name == "all")
        build_opt.passes.enabled = false;
      else
        build_opt.passes.disabled.insert(name);
    }
    build_opt.passes.dump_dir = opt.dump_graph;
    build_opt.passes.precision.fp16 = opt.fp16;
    build_opt.passes.precision.bf16 = opt.bf16;
    build_opt.passes.precision.tf32 = !opt.no_tf32;
    for (const std::string& spec : opt.layer_precisions) {
      auto pin = layer_precision(spec);
      if (!pin) return fail(pin.status());
      build_opt.passes.precision.pinned[pin->first] = pin->second;
    }
    // trtexec's wording: the precisions layers may run in.
    std::printf("[I] Precision: FP32%s%s%s\n", opt.no_tf32 ? "" : "+TF32", opt.fp16 ? "+FP16" : "",
                opt.bf16 ? "+BF16" : "");
    auto profiles = parse_profiles(*model->graph, opt.min_shapes, opt.opt_shapes, opt.max_shapes);
    if (!profiles) return fail(profiles.status());
    if (!profiles->empty()) build_opt.header_extra[kProfilesHeaderKey] = profiles_to_json(*profiles);
    for (const auto& [name, r] : *profiles)
      std::printf("[I] Optimization profile: %s min %s, opt %s, max %s\n", name.c_str(), r.min.to_string().c_str(),
                  r.opt.to_string().c_str(), r.max.to_string().c_str());
    if (!opt.mem_pool_size.empty()) {
      auto limit = workspace_limit(opt.mem_pool_size);
      if (!limit) return fail(limit.status());
      build_opt.workspace_limit = *limit;
    }
    // Kernels are timed with the thread count they will run with.
    if (opt.threads > 0) set_cpu_threads(opt.threads);
    // The imported graph is not needed after the build: the builder takes it and releases its weights early.
    auto built = build_engine_aligned(std::move(model->graph), build_opt, &report);
    if (!built) return fail(built.status());
    built_engine = std::make_shared<const Tensor>(std::move(*built));
    // The build's graph, timings and sections are freed; hand the allocator's free pages back to the system (glibc
    // keeps freed heap memory otherwise: 300 MB after a ResNet-50 build).
    malloc_trim(0);
    const std::string_view bytes(static_cast<const char*>(built_engine->raw()), built_engine->nbytes());
    for (const auto& w : report.warnings) std::printf("[W] %s\n", w.c_str());
    if (report.host_fallbacks > 0)
      std::printf("[W] %d layer%s without a CUDA kernel run%s on the host (host-fallback steps)\n",
                  report.host_fallbacks, report.host_fallbacks > 1 ? "s" : "", report.host_fallbacks > 1 ? "" : "s");
    print_optimizer_report(report.optimizer);
    if (!report.layout.empty()) std::printf("[I] Layout: %s\n", report.layout.c_str());
    std::printf(
        "[I] Engine built in %.1f ms (%zu bytes); %d kernel candidates timed in %.1f ms, %d from the timing "
        "cache\n",
        ms_since(t1), bytes.size(), report.timed, report.timing_ms, report.cached);
    if (report.prepared_only_constants > 0)
      std::printf("[I] Weights stored only in the kernels' packed layout: %d constant%s (%.1f MiB not stored twice)\n",
                  report.prepared_only_constants, report.prepared_only_constants > 1 ? "s" : "",
                  static_cast<double>(report.prepared_only_bytes) / (1 << 20));
    if (!opt.save_engine.empty()) {
      std::ofstream out(opt.save_engine, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out)
        return fail(Status(StatusCode::kIoError, str_cat("cannot write the engine to '", opt.save_engine, "'")));
      std::printf("[I] Engine saved to %s\n", opt.save_engine.c_str());
    }
  }
  if (opt.onnx.empty() && (!opt.min_shapes.empty() || !opt.opt_shapes.empty() || !opt.max_shapes.empty()))
    std::printf(
        "[W] --minShapes, --optShapes and --maxShapes apply when building from --onnx; a loaded engine keeps "
        "the profiles it was built with\n");
  // A saved engine is mapped, its weights used in place; a built one is read from memory.
  const auto load_start = Clock::now();
  Result<std::shared_ptr<const EngineImpl>> engine = invalid_argument("no engine");
  if (opt.load_engine.empty()) {
    // The built engine was written into aligned memory that it now uses in place: its weights are not copied again.
    engine = EngineImpl::deserialize(
        std::string_view(static_cast<const char*>(built_engine->raw()), built_engine->nbytes()), built_engine);
  } else {
    engine = EngineImpl::load_file(opt.load_engine);
  }
  if (!engine) {
    const std::string where = opt.load_engine.empty() ? "the built engine" : opt.load_engine;
    return fail(std::move(engine.take_status()).with_prefix(where));
  }
  if (!opt.load_engine.empty())
    std::printf("[I] Loaded engine %s (%llu bytes, mapped) in %.2f ms\n", opt.load_engine.c_str(),
                static_cast<unsigned long long>((*engine)->header().file_bytes), ms_since(load_start));
  if (!opt.device.empty() && (*engine)->device().is_cuda() != gpu)
    return fail(invalid_argument("--device ", opt.device, ": the engine runs on ", (*engine)->device().to_string(),
                                 "; rebuild it for ", opt.device));
  if ((*engine)->device().is_cuda()) {
    auto inputs = make_inputs(**engine, opt.shapes, opt.load_inputs);
    if (!inputs) return fail(inputs.status());
    return run_exec_cuda(opt, *engine, *inputs);
  }
  auto ctx = (*engine)->create_execution_context();
  if (!ctx) return fail(ctx.status());
  auto inputs = make_inputs(**engine, opt.shapes, opt.load_inputs);
  if (!inputs) return fail(inputs.status());
  if (opt.threads > 0) (*ctx)->set_threads(opt.threads);
  auto run_once = [&]() -> Status {
    for (auto& [name, t] : *inputs) KILN_RETURN_IF_ERROR((*ctx)->set_input(name, t));
    return (*ctx)->execute();
  };
  for (auto& [name, t] : *inputs)
    if (Status s = (*ctx)->set_input(name, t); !s.is_ok()) return fail(s);
  if (auto memory = (*ctx)->memory_report(); memory) {
    std::printf("[I] Activation memory: %.2f MiB planned for %d intermediates (%.2f MiB if each had its own)",
                static_cast<double>(memory->planned_bytes) / (1 << 20), memory->planned_values,
                static_cast<double>(memory->unplanned_bytes) / (1 << 20));
    if (memory->in_place_values > 0)
      std::printf("; %d of them in place over the input they replace", memory->in_place_values);
    if (memory->dynamic_values > 0)
      std::printf("; %d more allocated while running (shapes known only then)", memory->dynamic_values);
    std::printf("\n");
  }
  std::printf("=== Inference ===\n");
  // Warm-up: at least one run, then until warm_up_ms passed.
  const auto w0 = Clock::now();
  do {
    if (Status s = run_once(); !s.is_ok()) return fail(s);
  } while (ms_since(w0) < opt.warm_up_ms);
  std::vector<double> latencies;
  const auto start = Clock::now();
  while (static_cast<int>(latencies.size()) < opt.iterations || ms_since(start) < opt.duration_s * 1000) {
    const auto t = Clock::now();
    if (Status s = run_once(); !s.is_ok()) return fail(s);
    latencies.push_back(ms_since(t));
  }
  const double total_ms = ms_since(start);
  std::printf("[I] %zu iterations in %.1f ms (warm-up %.1f ms)\n", latencies.size(), total_ms,
              std::chrono::duration<double, std::milli>(start - w0).count());
  std::printf("=== Performance summary ===\n");
  std::printf("[I] Throughput: %g qps\n", static_cast<double>(latencies.size()) / (total_ms / 1000.0));
  std::printf("[I] %s\n", stats_line("Latency", latencies, opt.percentiles).c_str());
  // The CPU runtime executes synchronously: the call returns when the results are there.
  std::printf("[I] %s\n", stats_line("Enqueue Time", latencies, opt.percentiles).c_str());
  std::vector<double> averaged;
  for (size_t i = 0; i + static_cast<size_t>(opt.avg_runs) <= latencies.size(); i += static_cast<size_t>(opt.avg_runs))
    averaged.push_back(std::accumulate(latencies.begin() + static_cast<std::ptrdiff_t>(i),
                                       latencies.begin() + static_cast<std::ptrdiff_t>(i) + opt.avg_runs, 0.0) /
                       opt.avg_runs);
  if (!averaged.empty())
    std::printf("[I] Average over %d runs: first %.4g ms, last %.4g ms\n", opt.avg_runs, averaged.front(),
                averaged.back());
  if (opt.dump_profile || !opt.export_profile.empty()) {
    // Profiled runs come after the timed ones: timing each layer synchronizes after it.
    LayerProfile profile;
    (*ctx)->set_layer_timer(
        [&](std::string_view layer, std::string_view kernel, double ms) { profile.add(layer, kernel, ms); });
    const size_t runs = std::clamp<size_t>(latencies.size(), 1, 100);
    for (size_t i = 0; i < runs; ++i) {
      if (Status s = run_once(); !s.is_ok()) return fail(s);
      profile.end_run();
    }
    (*ctx)->set_layer_timer(nullptr);
    if (opt.dump_profile) std::printf("%s", profile.table().c_str());
    if (!opt.export_profile.empty()) {
      std::ofstream out(opt.export_profile);
      out << profile.json();
      if (!out) return fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_profile, "'")));
    }
  }
  if (!opt.export_layer_info.empty()) {
    std::ofstream out(opt.export_layer_info);
    out << layer_info_json(**engine, ctx->get());
    if (!out) return fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_layer_info, "'")));
  }
  if (!opt.export_times.empty()) {
    nlohmann::json times = nlohmann::json::array();
    double at = 0;
    for (double l : latencies) {
      times.push_back({{"startComputeMs", at}, {"latencyMs", l}});
      at += l;
    }
    std::ofstream(opt.export_times) << times.dump(1) << "\n";
  }
  if (!opt.export_output.empty()) {
    nlohmann::json outs = nlohmann::json::array();
    for (const std::string& name : (*engine)->output_names()) {
      auto t = (*ctx)->output(name);
      if (!t) return fail(t.status());
      outs.push_back(tensor_json(name, *t));
    }
    std::ofstream out(opt.export_output);
    out << outs.dump(1) << "\n";
    if (!out) return fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_output, "'")));
  }
  std::printf("&&&& PASSED kiln exec\n");
  return 0;
}

}  // namespace kiln::cli
