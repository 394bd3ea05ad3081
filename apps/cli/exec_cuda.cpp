#include "exec_cuda.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "core/cuda_runtime.h"
#include "kiln/strings.h"
#include "profile.h"
#include "runtime/inspector.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// One inference's times: host wall time of the enqueue call, the rest from CUDA events on the stream.
struct Times {
  double latency = 0, enqueue = 0, h2d = 0, compute = 0, d2h = 0;
  double start = 0;  // ms since the timed runs began
};

// One execution context on its own stream, inputs and outputs staged in pinned host memory.
struct Lane {
  std::unique_ptr<ContextImpl> ctx;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Event> e0, e1, e2, e3;
  std::vector<Tensor> host_in, dev_in;  // numeric inputs: pinned copy and the GPU tensor the context reads
  std::vector<std::string> out_names;
  std::vector<Tensor> host_out;  // pinned, per output
  std::unique_ptr<cuda::GraphExec> graph;
  std::vector<Times> times;
  double wall_ms = 0;
  Status status;
};

Status setup_lane(Lane& lane, const EngineImpl& engine, const NamedTensors& inputs, int threads) {
  const Device dev = engine.device();
  KILN_ASSIGN_OR_RETURN(lane.ctx, engine.create_execution_context());
  if (threads > 0) lane.ctx->set_threads(threads);
  KILN_ASSIGN_OR_RETURN(lane.stream, create_stream(dev));
  for (auto* e : {&lane.e0, &lane.e1, &lane.e2, &lane.e3}) {
    KILN_ASSIGN_OR_RETURN(*e, create_event(dev));
  }
  for (const auto& [name, t] : inputs) {
    if (t.dtype() == DataType::kString) {  // strings stay on the host; host steps read them
      KILN_RETURN_IF_ERROR(lane.ctx->set_input(name, t));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
    KILN_ASSIGN_OR_RETURN(Tensor h, Tensor::empty(c.dtype(), c.dims(), cuda::pinned_allocator(), "pinned input"));
    if (c.nbytes() > 0) std::memcpy(h.raw(), c.raw(), c.nbytes());
    KILN_ASSIGN_OR_RETURN(Tensor d,
                          Tensor::empty(c.dtype(), c.dims(), cuda::device_allocator(dev.index), "input " + name));
    KILN_RETURN_IF_ERROR(cuda::copy(h, d));
    KILN_RETURN_IF_ERROR(lane.ctx->set_input(name, d));
    lane.host_in.push_back(std::move(h));
    lane.dev_in.push_back(std::move(d));
  }
  lane.out_names = engine.output_names();
  lane.host_out.resize(lane.out_names.size());
  return Status::ok();
}

// Queues the copies of the outputs into pinned host memory (host-step outputs are copied at once).
Status queue_outputs(Lane& lane) {
  for (size_t i = 0; i < lane.out_names.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(RuntimeValue v, lane.ctx->output_value(lane.out_names[i]));
    if (v.kind != ValueKind::kTensor || !v.tensor.defined() || v.tensor.dtype() == DataType::kString) continue;
    const Tensor& t = v.tensor;
    Tensor& h = lane.host_out[i];
    if (!h.defined() || h.dims() != t.dims() || h.dtype() != t.dtype()) {
      KILN_ASSIGN_OR_RETURN(h, Tensor::empty(t.dtype(), t.dims(), cuda::pinned_allocator(), "pinned output"));
    }
    if (t.device().is_cpu()) {
      KILN_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
      if (c.nbytes() > 0) std::memcpy(h.raw(), c.raw(), c.nbytes());
    } else {
      KILN_RETURN_IF_ERROR(cuda::copy_async(h.raw(), t.raw(), t.nbytes(), *lane.stream));
    }
  }
  return Status::ok();
}

// One inference: H2D copies, the enqueue (or the graph's replay), D2H copies, each between two events.
Status iterate(Lane& lane, const ExecOptions& opt, Times* out) {
  Stream& s = *lane.stream;
  KILN_RETURN_IF_ERROR(lane.e0->record(s));
  if (!opt.no_data_transfers)
    for (size_t i = 0; i < lane.dev_in.size(); ++i)
      KILN_RETURN_IF_ERROR(cuda::copy(lane.host_in[i], lane.dev_in[i], &s));
  KILN_RETURN_IF_ERROR(lane.e1->record(s));
  const auto q0 = Clock::now();
  KILN_RETURN_IF_ERROR(lane.graph ? lane.graph->launch(s) : lane.ctx->enqueue(s));
  const double enqueue_ms = ms_since(q0);
  KILN_RETURN_IF_ERROR(lane.e2->record(s));
  if (!opt.no_data_transfers) KILN_RETURN_IF_ERROR(queue_outputs(lane));
  KILN_RETURN_IF_ERROR(lane.e3->record(s));
  KILN_RETURN_IF_ERROR(lane.e3->synchronize());
  if (!out) return Status::ok();
  out->enqueue = enqueue_ms;
  KILN_ASSIGN_OR_RETURN(float h2d, lane.e1->elapsed_ms_since(*lane.e0));
  KILN_ASSIGN_OR_RETURN(float compute, lane.e2->elapsed_ms_since(*lane.e1));
  KILN_ASSIGN_OR_RETURN(float d2h, lane.e3->elapsed_ms_since(*lane.e2));
  KILN_ASSIGN_OR_RETURN(float latency, lane.e3->elapsed_ms_since(*lane.e0));
  out->h2d = h2d;
  out->compute = compute;
  out->d2h = d2h;
  out->latency = latency;
  return Status::ok();
}

// A run's outputs on the host, for --exportOutput.
Result<std::vector<std::pair<std::string, Tensor>>> host_outputs(Lane& lane) {
  std::vector<std::pair<std::string, Tensor>> outs;
  for (const std::string& name : lane.out_names) {
    KILN_ASSIGN_OR_RETURN(Tensor t, lane.ctx->output(name));
    if (t.device().is_cuda()) {
      KILN_ASSIGN_OR_RETURN(Tensor h, Tensor::empty(t.dtype(), t.dims()));
      KILN_RETURN_IF_ERROR(cuda::copy(t, h, lane.stream.get()));
      KILN_RETURN_IF_ERROR(lane.stream->synchronize());
      t = std::move(h);
    }
    outs.emplace_back(name, std::move(t));
  }
  return outs;
}

std::vector<double> pick(const std::vector<Times>& times, double Times::*field) {
  std::vector<double> v;
  v.reserve(times.size());
  for (const Times& t : times) v.push_back(t.*field);
  return v;
}

nlohmann::json value_json(const std::string& name, const Tensor& t) {
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

Status profile_runs(Lane& lane, size_t runs, LayerProfile& profile) {
  lane.ctx->set_layer_timer(
      [&](std::string_view layer, std::string_view kernel, double ms) { profile.add(layer, kernel, ms); });
  for (size_t i = 0; i < runs; ++i) {
    Status st = lane.ctx->enqueue(*lane.stream);
    if (st.is_ok()) st = lane.stream->synchronize();
    if (!st.is_ok()) {
      lane.ctx->set_layer_timer(nullptr);
      return st;
    }
    profile.end_run();
  }
  lane.ctx->set_layer_timer(nullptr);
  return Status::ok();
}

}  // namespace

int run_exec_cuda(const ExecOptions& opt, const std::shared_ptr<const EngineImpl>& engine, const NamedTensors& inputs) {
  if (opt.streams < 1) return exec_fail(invalid_argument("--streams must be 1 or more, not ", opt.streams));
  const size_t n = static_cast<size_t>(opt.streams);
  std::vector<Lane> lanes(n);
  for (Lane& lane : lanes)
    if (Status s = setup_lane(lane, *engine, inputs, opt.threads); !s.is_ok()) return exec_fail(s);
  if (engine->host_fallback_count() > 0)
    std::printf("[W] %d layer%s run%s on the host (no CUDA kernel): their inputs and outputs cross PCIe each run\n",
                engine->host_fallback_count(), engine->host_fallback_count() > 1 ? "s" : "",
                engine->host_fallback_count() > 1 ? "" : "s");
  // The first run plans the memory and warms the libraries up; a graph is captured after it.
  for (Lane& lane : lanes)
    if (Status s = iterate(lane, opt, nullptr); !s.is_ok()) return exec_fail(s);
  if (auto memory = lanes[0].ctx->memory_report(); memory) {
    std::printf(
        "[I] Activation memory: %.2f MiB planned on the GPU for %d intermediates (%.2f MiB if each had its own)",
        static_cast<double>(memory->planned_bytes) / (1 << 20), memory->planned_values,
        static_cast<double>(memory->unplanned_bytes) / (1 << 20));
    if (memory->in_place_values > 0)
      std::printf("; %d of them in place over the input they replace", memory->in_place_values);
    if (memory->dynamic_values > 0)
      std::printf("; %d more allocated while running (shapes known only then)", memory->dynamic_values);
    std::printf("\n");
  }
  const bool profiling = opt.dump_profile || !opt.export_profile.empty();
  // Without --separateProfileRun the layers are timed during the timed runs (each layer then waits for the GPU).
  const bool profile_inline = profiling && !opt.separate_profile_run && !opt.use_cuda_graph;
  if (opt.use_cuda_graph) {
    for (Lane& lane : lanes) {
      auto graph = lane.ctx->capture_graph(*lane.stream);
      if (!graph) {
        std::printf("[W] --useCudaGraph: %s; running without a CUDA graph\n", graph.status().message().c_str());
        for (Lane& l : lanes) l.graph.reset();
        break;
      }
      lane.graph = std::move(*graph);
    }
    if (lanes[0].graph) std::printf("[I] Captured one inference per stream into a CUDA graph\n");
  }
  LayerProfile profile;
  if (profile_inline)
    lanes[0].ctx->set_layer_timer(
        [&](std::string_view layer, std::string_view kernel, double ms) { profile.add(layer, kernel, ms); });
  std::printf("=== Inference ===\n");
  std::barrier sync(static_cast<std::ptrdiff_t>(n));
  const auto body = [&](Lane& lane, bool first) {
    const auto w0 = Clock::now();
    do {
      lane.status = iterate(lane, opt, nullptr);
    } while (lane.status.is_ok() && ms_since(w0) < opt.warm_up_ms);
    if (!lane.status.is_ok()) {
      sync.arrive_and_drop();
      return;
    }
    sync.arrive_and_wait();  // every stream starts its timed runs together
    const auto start = Clock::now();
    while (static_cast<int>(lane.times.size()) < opt.iterations || ms_since(start) < opt.duration_s * 1000) {
      Times t;
      t.start = ms_since(start);
      lane.status = iterate(lane, opt, &t);
      if (!lane.status.is_ok()) return;
      if (first && profile_inline) profile.end_run();
      lane.times.push_back(t);
    }
    lane.wall_ms = ms_since(start);
  };
  if (n == 1) {
    body(lanes[0], true);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back(body, std::ref(lanes[i]), i == 0);
    for (auto& t : threads) t.join();
  }
  if (profile_inline) lanes[0].ctx->set_layer_timer(nullptr);
  for (Lane& lane : lanes)
    if (!lane.status.is_ok()) return exec_fail(lane.status);
  std::vector<Times> all;
  double wall_ms = 0;
  for (const Lane& lane : lanes) {
    all.insert(all.end(), lane.times.begin(), lane.times.end());
    wall_ms = std::max(wall_ms, lane.wall_ms);
  }
  std::printf("[I] %zu iterations on %zu stream%s in %.1f ms%s%s\n", all.size(), n, n > 1 ? "s" : "", wall_ms,
              lanes[0].graph ? ", CUDA graph replays" : "", opt.no_data_transfers ? ", no data transfers" : "");
  std::printf("=== Performance summary ===\n");
  std::printf("[I] Throughput: %g qps\n", static_cast<double>(all.size()) / (wall_ms / 1000.0));
  std::printf("[I] %s\n", stats_line("Latency", pick(all, &Times::latency), opt.percentiles).c_str());
  std::printf("[I] %s\n", stats_line("Enqueue Time", pick(all, &Times::enqueue), opt.percentiles).c_str());
  if (!opt.no_data_transfers)
    std::printf("[I] %s\n", stats_line("H2D Latency", pick(all, &Times::h2d), opt.percentiles).c_str());
  const std::vector<double> compute = pick(all, &Times::compute);
  std::printf("[I] %s\n", stats_line("GPU Compute Time", compute, opt.percentiles).c_str());
  if (!opt.no_data_transfers)
    std::printf("[I] %s\n", stats_line("D2H Latency", pick(all, &Times::d2h), opt.percentiles).c_str());
  std::printf("[I] Total Host Walltime: %g s\n", wall_ms / 1000.0);
  std::printf("[I] Total GPU Compute Time: %g s\n", std::accumulate(compute.begin(), compute.end(), 0.0) / 1000.0);
  if (const CachingAllocator* cache = lanes[0].ctx->device_cache()) {
    const CacheStats st = cache->stats();
    std::printf(
        "[I] GPU memory of a context: peak %.2f MiB in use, %.2f MiB reserved; %zu allocations, %zu from "
        "cudaMalloc\n",
        static_cast<double>(st.peak_in_use_bytes) / (1 << 20), static_cast<double>(st.reserved_bytes) / (1 << 20),
        st.allocations, st.upstream_allocations);
  }
  if (profiling) {
    if (!profile_inline) {
      const size_t runs = std::clamp<size_t>(lanes[0].times.size(), 1, 100);
      if (Status s = profile_runs(lanes[0], runs, profile); !s.is_ok()) return exec_fail(s);
    }
    if (opt.dump_profile) std::printf("%s", profile.table().c_str());
    if (!opt.export_profile.empty()) {
      std::ofstream out(opt.export_profile);
      out << profile.json();
      if (!out) return exec_fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_profile, "'")));
    }
  }
  if (!opt.export_layer_info.empty()) {
    std::ofstream out(opt.export_layer_info);
    out << layer_info_json(*engine, lanes[0].ctx.get());
    if (!out) return exec_fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_layer_info, "'")));
  }
  if (!opt.export_times.empty()) {
    nlohmann::json times = nlohmann::json::array();
    for (const Times& t : lanes[0].times)
      times.push_back({{"startMs", t.start},
                       {"latencyMs", t.latency},
                       {"enqueueMs", t.enqueue},
                       {"h2dMs", t.h2d},
                       {"computeMs", t.compute},
                       {"d2hMs", t.d2h}});
    std::ofstream(opt.export_times) << times.dump(1) << "\n";
  }
  if (!opt.export_output.empty()) {
    auto outs = host_outputs(lanes[0]);
    if (!outs) return exec_fail(outs.status());
    nlohmann::json json = nlohmann::json::array();
    for (const auto& [name, t] : *outs) json.push_back(value_json(name, t));
    std::ofstream out(opt.export_output);
    out << json.dump(1) << "\n";
    if (!out) return exec_fail(Status(StatusCode::kIoError, str_cat("cannot write '", opt.export_output, "'")));
  }
  std::printf("&&&& PASSED kiln exec\n");
  return 0;
}

}  // namespace kiln::cli
