#include "builder/tactics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "core/cuda_runtime.h"
#include "kernels/cpu/threads.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxTimingBytes = size_t{1} << 30;  // problems larger than this are not timed

// Why the problem cannot be timed on random inputs (empty: it can).
std::string untimeable(const OpCall& call, Backend backend) {
  if (backend == Backend::kCuda && !cuda::gpu_available()) return "no GPU answers to time CUDA kernels on";
  size_t bytes = 0;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorDesc& d = call.inputs[i];
    if (!d.present) continue;
    if (d.kind != ValueKind::kTensor || d.dtype == DataType::kString) return "non-numeric input";
    if (!d.dims.is_static()) return "dynamic input shape";
    bytes += static_cast<size_t>(d.dims.numel()) * dtype_size(d.dtype);
  }
  for (int v : call.schema->value_inputs)
    if (call.has_input(v) && !call.constant(v)) return "its output shape depends on input values";
  for (const TensorDesc& d : call.outputs) {
    if (!d.dims.is_static()) return "dynamic output shape";
    bytes += static_cast<size_t>(d.dims.numel()) * dtype_size(d.dtype);
  }
  if (bytes > kMaxTimingBytes) return "too large to time";
  return {};
}

// Inputs for timing: the constants themselves, random floats in [-1, 1], integers and booleans 0.
Result<std::vector<Tensor>> timing_inputs(const OpCall& call) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<Tensor> src;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorDesc& d = call.inputs[i];
    if (!d.present) {
      src.emplace_back();
      continue;
    }
    if (const Tensor* c = call.constant(static_cast<int>(i))) {
      src.push_back(*c);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(d.dtype, d.dims));
    if (is_floating(d.dtype))
      for (int64_t k = 0; k < t.numel(); ++k) t.set(k, uniform(rng));
    src.push_back(std::move(t));
  }
  return src;
}

// Median time of one candidate; an error when it cannot be created or run on these inputs.
struct Timing {
  double ms = 0;
  size_t workspace = 0;
};

// CPU candidates of one problem timed in turns: each is made and run once to warm up (primitive creation, weight
// reorders; it tells the workspace), then every round runs each candidate that still needs runs once, so a load that
// comes and goes on the machine while a layer is timed weighs on all its candidates alike (timed one after another,
// a candidate timed during a burst of another process's work lost to slower ones). Each runs at least 1 + level
// times and until its runs add up to 0.5 level^2 ms (at most 200 runs); its median counts.
class CpuRace {
 public:
  CpuRace(const std::vector<Tensor>& inputs, int level, uint64_t workspace_limit)
      : inputs_(inputs), min_runs_(1 + level), min_ms_(0.5 * level * level), workspace_limit_(workspace_limit) {}

  /// Makes and warms up a candidate; its index for `result`.
  size_t enter(const OpCall& call, const KernelImpl& impl) {
    auto entry = std::make_unique<Entry>();
    entry->call = call;
    entry->status = warm_up(*entry, impl);
    entries_.push_back(std::move(entry));
    return entries_.size() - 1;
  }

  void run() {
    for (bool more = true; more;) {
      more = false;
      for (auto& e : entries_) {
        if (!e->status.is_ok() || done(*e)) continue;
        more = true;
        KernelContext ctx{e->call, inputs_, dst_, cpu_stream(), cpu_allocator()};
        const auto t0 = Clock::now();
        e->status = e->kernel->run(ctx);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        e->times.push_back(ms);
        e->total += ms;
      }
    }
  }

  Result<Timing> result(size_t i) const {
    const Entry& e = *entries_.at(i);
    if (!e.status.is_ok()) return e.status;
    std::vector<double> times = e.times;
    std::sort(times.begin(), times.end());
    return Timing{times[times.size() / 2], e.kernel->workspace_bytes()};
  }

 private:
  struct Entry {
    OpCall call;
    std::unique_ptr<Kernel> kernel;
    std::vector<double> times;
    double total = 0;
    Status status;
  };

  bool done(const Entry& e) const {
    const auto runs = static_cast<int>(e.times.size());
    return runs >= min_runs_ && (e.total >= min_ms_ || runs >= 200);
  }

  Status warm_up(Entry& e, const KernelImpl& impl) {
    KILN_ASSIGN_OR_RETURN(e.kernel, impl.create(e.call));
    if (dst_.empty())
      for (const TensorDesc& d : e.call.outputs) {
        KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(d.dtype, d.dims));
        dst_.push_back(std::move(t));
      }
    KernelContext ctx{e.call, inputs_, dst_, cpu_stream(), cpu_allocator()};
    KILN_RETURN_IF_ERROR(e.kernel->run(ctx));
    if (workspace_limit_ > 0 && e.kernel->workspace_bytes() > workspace_limit_)
      return Status(StatusCode::kOutOfMemory, str_cat("needs ", e.kernel->workspace_bytes(),
                                                      " bytes of workspace, over the limit of ", workspace_limit_));
    return Status::ok();
  }

  const std::vector<Tensor>& inputs_;
  const int min_runs_;
  const double min_ms_;
  const uint64_t workspace_limit_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<Tensor> dst_;  // one set of outputs all candidates write (one layer's worth of memory, not one each)
};

// CUDA candidates: inputs uploaded once per problem, a warm-up run, then runs timed with CUDA events on one
// stream; the median counts, as on the CPU.
Result<Timing> time_cuda_candidate(const OpCall& call, const KernelImpl& impl, const std::vector<Tensor>& inputs,
                                   int level, uint64_t workspace_limit, GpuTimer& gpu);

std::string candidate_name(const KernelImpl& impl, const std::string& tactic) {
  return tactic.empty() ? impl.name : str_cat(impl.name, "[", tactic, "]");
}

}  // namespace

struct GpuTimer {
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Event> start, stop;
  const std::vector<Tensor>* host_inputs = nullptr;  ///< the problem `inputs` were uploaded for
  std::vector<Tensor> inputs;                        ///< on the GPU
};

namespace {

// A host function that holds its stream until the host opens it (or 20 ms pass: the host is itself waiting for
// the stream).
struct StreamGate {
  std::atomic<bool> open{false}, gave_up{false};
  static void wait(void* arg) {
    auto* gate = static_cast<StreamGate*>(arg);
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(20);
    while (!gate->open.load(std::memory_order_acquire)) {
      if (Clock::now() > deadline) {
        gate->gave_up.store(true, std::memory_order_release);
        return;
      }
      std::this_thread::yield();
    }
  }
};

Result<GpuTimer*> gpu_timer(TacticSearch& search) {
  if (!search.gpu) {
    auto gpu = std::make_shared<GpuTimer>();
    KILN_ASSIGN_OR_RETURN(gpu->stream, create_stream(Device::cuda(0)));
    KILN_ASSIGN_OR_RETURN(gpu->start, create_event(Device::cuda(0)));
    KILN_ASSIGN_OR_RETURN(gpu->stop, create_event(Device::cuda(0)));
    search.gpu = std::move(gpu);
  }
  return search.gpu.get();
}

Status upload_timing_inputs(const std::vector<Tensor>& host, GpuTimer& gpu) {
  if (gpu.host_inputs == &host) return Status::ok();
  gpu.inputs.clear();
  for (const Tensor& t : host) {
    if (!t.defined()) {
      gpu.inputs.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
    KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(c.dtype(), c.dims(), cuda::device_allocator(0), "timing input"));
    KILN_RETURN_IF_ERROR(cuda::copy(c, d));
    gpu.inputs.push_back(std::move(d));
  }
  gpu.host_inputs = &host;
  return Status::ok();
}

Result<Timing> time_cuda_candidate(const OpCall& call, const KernelImpl& impl, const std::vector<Tensor>& inputs,
                                   int level, uint64_t workspace_limit, GpuTimer& gpu) {
  KILN_RETURN_IF_ERROR(upload_timing_inputs(inputs, gpu));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, impl.create(call));
  Allocator& alloc = cuda::device_allocator(0);
  std::vector<Tensor> dst;
  for (const TensorDesc& d : call.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(d.dtype, d.dims, alloc, "timing output"));
    dst.push_back(std::move(t));
  }
  Stream& stream = *gpu.stream;
  const int min_runs = 1 + level;
  const double min_ms = 0.5 * level * level;
  std::vector<double> times;
  double total = 0;
  bool gated = true;
  for (int run = -1; run < min_runs || (total < min_ms && run < 200); ++run) {
    KernelContext ctx{call, gpu.inputs, dst, stream, alloc};
    if (run < 0) {  // warm-up: library plans, algorithm choice, lazy module loading; tells the workspace
      KILN_RETURN_IF_ERROR(kernel->run(ctx));
      KILN_RETURN_IF_ERROR(stream.synchronize());
      if (workspace_limit > 0 && kernel->workspace_bytes() > workspace_limit)
        return Status(StatusCode::kOutOfMemory, str_cat("needs ", kernel->workspace_bytes(),
                                                        " bytes of workspace, over the limit of ", workspace_limit));
      continue;
    }
    // The stream waits at a gate until the run is queued, so the events time the GPU's work alone, as a CUDA
    // graph replays it, not the host's time to launch it. A kernel that waits for its stream inside `run` meets
    // the closed gate; the gate then opens by itself and later runs of that candidate go ungated.
    StreamGate gate;
    if (gated) KILN_RETURN_IF_ERROR(cuda::launch_host_func(stream, StreamGate::wait, &gate));
    KILN_RETURN_IF_ERROR(gpu.start->record(stream));
    Status st = kernel->run(ctx);
    Status stopped = gpu.stop->record(stream);
    gate.open.store(true, std::memory_order_release);
    KILN_RETURN_IF_ERROR(stopped);
    KILN_RETURN_IF_ERROR(gpu.stop->synchronize());
    KILN_RETURN_IF_ERROR(st);
    if (gate.gave_up.load(std::memory_order_acquire)) gated = false;
    KILN_ASSIGN_OR_RETURN(float ms, gpu.stop->elapsed_ms_since(*gpu.start));
    times.push_back(ms);
    total += ms;
  }
  std::sort(times.begin(), times.end());
  return Timing{times[times.size() / 2], kernel->workspace_bytes()};
}

}  // namespace

std::string timing_device(Backend backend) {
  if (backend == Backend::kCuda) {
    const cuda::RuntimeInfo rt = cuda::query_runtime();
    if (rt.gpus.empty()) return "cuda (no GPU)";
    const cuda::GpuInfo& g = rt.gpus.front();
    return str_cat("cuda ", g.name, ", compute capability ", g.cc_major, ".", g.cc_minor);
  }
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return str_cat(backend_name(backend), " ", model, ", ", cpu_threads(), " threads");
}

// How candidates are timed, part of every key: times measured another way are not comparable with new ones, so a
// cache written before a change of method misses instead of mixing them. 2: CUDA candidates timed on the GPU alone
// (ed72a73), CPU candidates timed in turns (CpuRace).
constexpr int kTimingMethod = 2;

std::string timing_key(const OpCall& call, const KernelImpl& impl, const std::string& tactic,
                       const std::string& device) {
  std::string text = str_cat("timing method ", kTimingMethod, "|", device, "|", call.schema->name, "|",
                             call.attrs ? call.attrs->to_json() : "", "|");
  for (const TensorDesc& d : call.inputs) text += d.to_string() + (d.present ? "" : "-") + ",";
  text += "|";
  for (const TensorDesc& d : call.outputs) text += d.to_string() + ",";
  return stable_hash(str_cat(text, "|", impl.name, "|", tactic));
}

Result<TacticChoice> choose_kernel(const OpCall& call, TacticSearch& search, std::vector<std::string>& log) {
  std::vector<TacticChoice> candidates;
  std::string reasons;
  for (const KernelImpl* impl : KernelRegistry::global().find(call.schema->name, search.backend)) {
    Status ok = impl->supports(call);
    if (!ok.is_ok()) {
      log.push_back(str_cat(impl->name, " rejects it: ", ok.message()));
      reasons += str_cat("\n    ", impl->name, ": ", ok.message());
      continue;
    }
    const std::vector<std::string> tactics = impl->tactics ? impl->tactics(call) : std::vector<std::string>{};
    if (tactics.empty()) candidates.push_back({impl, "", -1});
    for (const std::string& t : tactics) candidates.push_back({impl, t, -1});
  }
  if (candidates.empty())
    return unsupported("no ", backend_name(search.backend), " kernel accepts ", call.schema->name, " ",
                       call.to_string(), reasons.empty() ? " (none registered)" : ":" + reasons);
  const bool check_workspace = search.workspace_limit > 0;
  if ((search.level == 0 && !check_workspace) ||
      (candidates.size() == 1 && !check_workspace && !search.time_sole_candidate))
    return candidates.front();
  if (const std::string why = untimeable(call, search.backend); !why.empty()) {
    log.push_back(str_cat("not timed (", why, "): the first accepted candidate runs",
                          check_workspace ? " (its workspace is not checked)" : ""));
    return candidates.front();
  }
  if (search.device.empty()) search.device = timing_device(search.backend);
  const std::string& device = search.device;
  std::vector<Tensor> inputs;
  // Uncached CPU candidates wait for one race after the loop (at level 0 each is timed alone: the first that fits
  // is taken).
  std::optional<CpuRace> race;
  struct Racing {
    TacticChoice* choice;
    size_t index;
    std::optional<double> before;
  };
  std::vector<Racing> racing;
  // `before`: the time this build measured first, when this is the second pass's measurement (the lower counts).
  auto record = [&](TacticChoice& c, const std::string& key, const Result<Timing>& timing,
                    std::optional<double> before) {
    if (before) search.remeasured.insert(key);
    if (!timing && before) {
      c.ms = *before;
      log.push_back(str_cat(candidate_name(*c.impl, c.tactic), ": ", c.ms,
                            " ms (measured before; again: ", timing.status().message(), ")"));
      return true;
    }
    if (!timing) {
      log.push_back(str_cat(candidate_name(*c.impl, c.tactic), " is not chosen: ", timing.status().message()));
      return false;
    }
    search.measured.insert(key);
    c.ms = before ? std::min(*before, timing->ms) : timing->ms;
    if (!before) ++search.timed;  // candidates measured (a second measurement is not another candidate)
    if (search.cache) {
      search.cache->put(key, c.ms);
      search.cache->put(key + ".workspace", static_cast<double>(timing->workspace));
    }
    log.push_back(str_cat(candidate_name(*c.impl, c.tactic), ": ", c.ms, " ms",
                          before ? str_cat(" (the lower of ", *before, " and ", timing->ms, " measured again)") : "",
                          ", workspace ", timing->workspace, " bytes"));
    return true;
  };
  for (TacticChoice& c : candidates) {
    const std::string key = timing_key(call, *c.impl, c.tactic, device);
    const std::string workspace_key = key + ".workspace";
    auto hit = search.cache ? search.cache->find(key) : std::nullopt;
    auto hit_workspace = search.cache ? search.cache->find(workspace_key) : std::nullopt;
    const bool again = hit && search.second_pass && search.measured.count(key) > 0 && search.remeasured.count(key) == 0;
    const std::optional<double> before = again ? hit : std::nullopt;
    if (hit && !again && (!check_workspace || hit_workspace)) {
      if (check_workspace && *hit_workspace > static_cast<double>(search.workspace_limit)) {
        log.push_back(str_cat(candidate_name(*c.impl, c.tactic), " needs ", *hit_workspace,
                              " bytes of workspace, over the limit (timing cache)"));
        continue;
      }
      c.ms = *hit;
      search.cache->note_read(key);
      log.push_back(str_cat(candidate_name(*c.impl, c.tactic), ": ", c.ms, " ms (timing cache)"));
    } else {
      if (inputs.empty()) {
        auto made = timing_inputs(call);
        if (!made) return candidates.front();
        inputs = std::move(*made);
        if (search.gpu) search.gpu->host_inputs = nullptr;  // a new problem: its inputs go up once
      }
      OpCall with_tactic = call;
      with_tactic.tactic = c.tactic;
      const auto t0 = Clock::now();
      Result<Timing> timing = Status(StatusCode::kInternal, "not timed");
      if (c.impl->backend != Backend::kCuda) {
        if (!race) race.emplace(inputs, search.level, search.workspace_limit);
        racing.push_back({&c, race->enter(with_tactic, *c.impl), before});
        if (search.level > 0) {  // timed with the others after the loop
          search.timing_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          continue;
        }
        race->run();
        timing = race->result(racing.back().index);
      } else {
        auto gpu = gpu_timer(search);
        timing = gpu ? time_cuda_candidate(with_tactic, *c.impl, inputs, search.level, search.workspace_limit, **gpu)
                     : Result<Timing>(gpu.take_status());
      }
      search.timing_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!record(c, key, timing, before)) continue;
    }
    if (search.level == 0) return c;  // with a workspace limit: the first candidate that fits
  }
  if (race && search.level > 0) {
    const auto t0 = Clock::now();
    race->run();
    search.timing_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (const Racing& r : racing)
      record(*r.choice, timing_key(call, *r.choice->impl, r.choice->tactic, device), race->result(r.index), r.before);
  }
  TacticChoice* best = nullptr;
  for (TacticChoice& c : candidates)
    if (c.ms >= 0 && (!best || c.ms < best->ms)) best = &c;
  if (!best && check_workspace)
    return Status(StatusCode::kOutOfMemory,
                  str_cat("no ", backend_name(search.backend), " kernel for ", call.schema->name,
                          " fits the workspace limit of ", search.workspace_limit, " bytes; raise the limit"));
  if (!best) {
    log.push_back("no candidate ran on random inputs: the first accepted one runs");
    return candidates.front();
  }
  return *best;
}

}  // namespace kiln
