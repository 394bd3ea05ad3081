// The public runtime API (include/kiln/runtime.h) over EngineImpl and ContextImpl.
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "runtime/api_profiles.h"
#include "runtime/engine.h"

namespace kiln {

// ---- profiles in the engine header ----

std::string profiles_to_json(const ShapeRanges& profiles) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, r] : profiles)
    j[name] = {{"min", r.min.to_vector()}, {"opt", r.opt.to_vector()}, {"max", r.max.to_vector()}};
  return j.dump();
}

Result<ShapeRanges> profiles_from_json(std::string_view json) {
  const Status corrupt = invalid_argument("the engine's optimization profiles are corrupt; rebuild the engine");
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt;
  ShapeRanges out;
  for (const auto& [name, r] : j.items()) {
    ShapeRange range;
    for (auto [key, dims] :
         {std::pair{"min", &range.min}, std::pair{"opt", &range.opt}, std::pair{"max", &range.max}}) {
      if (!r.is_object() || !r.contains(key) || !r[key].is_array()) return corrupt;
      std::vector<int64_t> v;
      for (const auto& d : r[key]) {
        if (!d.is_number_integer()) return corrupt;
        v.push_back(d.get<int64_t>());
      }
      auto parsed = Dims::from(v);
      if (!parsed) return corrupt;
      *dims = *parsed;
    }
    out.emplace(name, range);
  }
  return out;
}

std::string_view verbosity_name(ProfilingVerbosity verbosity) {
  switch (verbosity) {
    case ProfilingVerbosity::kLayerNamesOnly: return "layer_names_only";
    case ProfilingVerbosity::kNone: return "none";
    case ProfilingVerbosity::kDetailed: return "detailed";
  }
  return "layer_names_only";
}

Result<ProfilingVerbosity> parse_verbosity(std::string_view name) {
  for (auto v : {ProfilingVerbosity::kLayerNamesOnly, ProfilingVerbosity::kNone, ProfilingVerbosity::kDetailed})
    if (verbosity_name(v) == name) return v;
  return invalid_argument("the engine's profiling verbosity '", name, "' is unknown; rebuild the engine");
}

// ---- shared engine description ----

namespace {

struct IoTensor {
  std::string name;
  const Value* value;
  TensorIOMode mode;
};

// What an engine and its contexts share; contexts keep it alive, so an engine may go first.
struct EngineInfo {
  std::shared_ptr<const EngineImpl> impl;
  std::vector<IoTensor> io;  // inputs, then outputs
  ShapeRanges profiles;
  ProfilingVerbosity verbosity = ProfilingVerbosity::kLayerNamesOnly;

  const IoTensor* find(std::string_view name) const {
    for (const IoTensor& t : io)
      if (t.name == name) return &t;
    return nullptr;
  }
  std::string names(TensorIOMode mode) const {
    std::string s;
    for (const IoTensor& t : io)
      if (t.mode == mode) s += (s.empty() ? "" : ", ") + t.name;
    return s.empty() ? "none" : s;
  }
  Status unknown(std::string_view name) const {
    return invalid_argument("the engine has no tensor '", name, "' (inputs: ", names(TensorIOMode::kInput),
                            "; outputs: ", names(TensorIOMode::kOutput), ")");
  }
  Result<const IoTensor*> lookup(std::string_view name) const {
    const IoTensor* t = find(name);
    if (!t) return unknown(name);
    return t;
  }
};

// The public API binds tensors only; string tensors hold interned ids that belong to the process.
Status check_bindable(const IoTensor& t) {
  const char* what = t.mode == TensorIOMode::kInput ? "input" : "output";
  if (t.value->kind != ValueKind::kTensor)
    return unsupported(what, " '", t.name, "' is a ", value_kind_name(t.value->kind),
                       "; the runtime API binds tensors only (the internal ContextImpl takes sequences)");
  if (t.value->dtype == DataType::kString)
    return unsupported(what, " '", t.name, "' holds strings; the runtime API binds numeric tensors only");
  return Status::ok();
}

}  // namespace

// ---- Engine ----

struct Engine::State {
  std::shared_ptr<const EngineInfo> info;
};

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;

int Engine::num_io_tensors() const { return static_cast<int>(state_->info->io.size()); }

std::string_view Engine::io_tensor_name(int index) const {
  const auto& io = state_->info->io;
  if (index < 0 || static_cast<size_t>(index) >= io.size()) return {};
  return io[static_cast<size_t>(index)].name;
}

TensorIOMode Engine::tensor_io_mode(std::string_view name) const {
  const IoTensor* t = state_->info->find(name);
  return t ? t->mode : TensorIOMode::kNone;
}

Result<DataType> Engine::tensor_dtype(std::string_view name) const {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(name));
  return t->value->dtype;
}

Result<Dims> Engine::tensor_shape(std::string_view name) const {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(name));
  return t->value->dims;
}

Result<ShapeRange> Engine::profile_shape(std::string_view input) const {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(input));
  if (t->mode != TensorIOMode::kInput)
    return invalid_argument("'", input, "' is an output; optimization profiles belong to inputs (",
                            state_->info->names(TensorIOMode::kInput), ")");
  auto it = state_->info->profiles.find(input);
  if (it == state_->info->profiles.end())
    return Status(StatusCode::kNotFound, str_cat("input '", input, "' has no optimization profile; it accepts ",
                                                 t->value->dims.to_string(), " (? is any size)"));
  return it->second;
}

int Engine::num_layers() const { return static_cast<int>(state_->info->impl->plan().steps.size()); }

std::string Engine::layer_information() const {
  const EngineInfo& info = *state_->info;
  if (info.verbosity == ProfilingVerbosity::kDetailed) return info.impl->inspect();
  if (info.verbosity == ProfilingVerbosity::kNone) return {};
  std::string s;
  for (const PlanStep& st : info.impl->plan().steps) s += st.node->name + "\n";
  return s;
}

ProfilingVerbosity Engine::profiling_verbosity() const { return state_->info->verbosity; }

// ---- ExecutionContext ----

namespace {
struct Binding {
  void* address = nullptr;
  size_t capacity = 0;  // 0: unknown
  OutputAllocator* output_allocator = nullptr;
  void* allocated = nullptr;  // what output_allocator returned last
  std::optional<Dims> shape;  // inputs: set by set_input_shape; outputs: of the last run
};
}  // namespace

struct ExecutionContext::State {
  std::shared_ptr<const EngineInfo> info;
  std::unique_ptr<ContextImpl> impl;
  std::map<std::string, Binding, std::less<>> bindings;
  Profiler* profiler = nullptr;
  std::unique_ptr<Stream> stream;  // execute() of a GPU engine runs here
};

namespace {

// A copy from a pinned staging buffer into pageable memory, run by the stream once the staging is filled.
struct PendingCopy {
  Tensor staging;
  void* dst;
  size_t bytes;
};
void finish_copy(void* p) {
  auto* c = static_cast<PendingCopy*>(p);
  std::memcpy(c->dst, c->staging.raw(), c->bytes);
  delete c;
}

// Writes a GPU engine's output into the caller's memory without waiting for the stream: GPU and pinned
// destinations by an asynchronous copy, pageable ones through a pinned buffer and a host function.
Status write_output(const Tensor& out, void* dst, Stream& stream) {
  const size_t bytes = out.nbytes();
  if (bytes == 0) return Status::ok();
  if (out.device().is_cpu()) {  // a host step made it: it is final already
    if (cuda::pointer_info(dst).device.is_cuda()) return cuda::copy_async(dst, out.raw(), bytes, stream);
    std::memmove(dst, out.raw(), bytes);
    return Status::ok();
  }
  const cuda::PointerInfo where = cuda::pointer_info(dst);
  if (where.device.is_cuda() || where.pinned) return cuda::copy_async(dst, out.raw(), bytes, stream);
  KILN_ASSIGN_OR_RETURN(Tensor staging,
                        Tensor::empty(out.dtype(), out.dims(), cuda::pinned_allocator(), "output staging"));
  KILN_RETURN_IF_ERROR(cuda::copy_async(staging.raw(), out.raw(), bytes, stream));
  auto* pending = new PendingCopy{std::move(staging), dst, bytes};
  if (Status st = cuda::launch_host_func(stream, finish_copy, pending); !st.is_ok()) {
    delete pending;
    return st;
  }
  return Status::ok();
}

}  // namespace

ExecutionContext::ExecutionContext(std::unique_ptr<State> state) : state_(std::move(state)) {}
ExecutionContext::~ExecutionContext() = default;

Result<std::unique_ptr<ExecutionContext>> Engine::create_execution_context() const {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ContextImpl> impl, state_->info->impl->create_execution_context());
  auto state = std::make_unique<ExecutionContext::State>();
  state->info = state_->info;
  state->impl = std::move(impl);
  for (const IoTensor& t : state_->info->io) state->bindings[t.name] = Binding{};
  return std::unique_ptr<ExecutionContext>(new ExecutionContext(std::move(state)));
}

Status ExecutionContext::set_input_shape(std::string_view name, const Dims& dims) {
  const EngineInfo& info = *state_->info;
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, info.lookup(name));
  if (t->mode != TensorIOMode::kInput)
    return invalid_argument("set_input_shape: '", name, "' is an output; its shape follows from the inputs (",
                            info.names(TensorIOMode::kInput), ")");
  KILN_RETURN_IF_ERROR(check_bindable(*t));
  auto it = info.profiles.find(name);
  KILN_RETURN_IF_ERROR(
      check_profile_shape(name, t->value->dims, it == info.profiles.end() ? nullptr : &it->second, dims));
  state_->bindings[std::string(name)].shape = dims;
  return Status::ok();
}

Status ExecutionContext::set_tensor_address(std::string_view name, void* address, size_t capacity_bytes) {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(name));
  KILN_RETURN_IF_ERROR(check_bindable(*t));
  if (!address) return invalid_argument("set_tensor_address: the address given for '", name, "' is null");
  Binding& b = state_->bindings[std::string(name)];
  b.address = address;
  b.capacity = capacity_bytes;
  return Status::ok();
}

void* ExecutionContext::tensor_address(std::string_view name) const {
  auto it = state_->bindings.find(name);
  return it == state_->bindings.end() ? nullptr : it->second.address;
}

Status ExecutionContext::set_output_allocator(std::string_view name, OutputAllocator* allocator) {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(name));
  if (t->mode != TensorIOMode::kOutput)
    return invalid_argument("set_output_allocator: '", name, "' is an input; output allocators are for outputs (",
                            state_->info->names(TensorIOMode::kOutput), ")");
  KILN_RETURN_IF_ERROR(check_bindable(*t));
  Binding& b = state_->bindings[std::string(name)];
  b.output_allocator = allocator;
  b.allocated = nullptr;
  return Status::ok();
}

Result<Dims> ExecutionContext::tensor_shape(std::string_view name) const {
  KILN_ASSIGN_OR_RETURN(const IoTensor* t, state_->info->lookup(name));
  const Binding& b = state_->bindings.find(name)->second;
  if (b.shape) return *b.shape;
  if (t->value->dims.is_static()) return t->value->dims;
  if (t->mode == TensorIOMode::kInput)
    return invalid_argument("input '", name, "' has dynamic shape ", t->value->dims.to_string(),
                            ": call set_input_shape first");
  return invalid_argument("output '", name, "' has dynamic shape ", t->value->dims.to_string(),
                          "; it is known after a run");
}

void ExecutionContext::set_profiler(Profiler* profiler) {
  state_->profiler = profiler;
  if (!profiler) {
    state_->impl->set_layer_timer(nullptr);
    return;
  }
  state_->impl->set_layer_timer([profiler](std::string_view layer, std::string_view /*kernel*/, double ms) {
    const std::string name(layer);
    profiler->report_layer_time(name.c_str(), static_cast<float>(ms));
  });
}

Profiler* ExecutionContext::profiler() const { return state_->profiler; }

Status ExecutionContext::set_threads(int threads) {
  if (threads < 0) return invalid_argument("set_threads: ", threads, " is negative (0: the calling thread's count)");
  state_->impl->set_threads(threads);
  return Status::ok();
}

int ExecutionContext::threads() const { return state_->impl->threads(); }

Status ExecutionContext::set_allocator(Allocator* allocator) {
  const Device device = state_->info->impl->device();
  if (allocator && allocator->device() != device)
    return invalid_argument("set_allocator: the allocator hands out ", allocator->device().to_string(),
                            " memory but this engine runs on ", device.to_string(), "; give an allocator for ",
                            device.to_string());
  if (allocator)
    state_->impl->set_allocator(*allocator);
  else if (device.is_cpu())
    state_->impl->set_allocator(cpu_allocator());
  else
    state_->impl->set_allocator(*state_->impl->device_cache());
  return Status::ok();
}

Status ExecutionContext::execute() {
  const Device device = state_->info->impl->device();
  if (device.is_cpu()) return enqueue(cpu_stream());
  if (!state_->stream) {
    KILN_ASSIGN_OR_RETURN(state_->stream, create_stream(device));
  }
  KILN_RETURN_IF_ERROR(enqueue(*state_->stream));
  return state_->stream->synchronize();
}

Status ExecutionContext::enqueue(Stream& stream, Event* input_consumed) {
  const Device device = state_->info->impl->device();
  if (stream.device() != device)
    return unsupported("enqueue: the stream is on ", stream.device().to_string(), " but this engine runs on ",
                       device.to_string(), "; use a ",
                       device.is_cpu() ? "CPU stream (kiln::cpu_stream())" : "CUDA stream of that GPU");
  const bool gpu = device.is_cuda();
  const EngineInfo& info = *state_->info;
  // Check every binding before running anything.
  for (const IoTensor& t : info.io) {
    const Binding& b = state_->bindings[t.name];
    if (t.mode == TensorIOMode::kOutput) {
      if (!b.address && !b.output_allocator)
        return invalid_argument("output '", t.name,
                                "' has no address: call set_tensor_address or set_output_allocator");
      continue;
    }
    KILN_RETURN_IF_ERROR(check_bindable(t));
    const Dims dims = b.shape ? *b.shape : t.value->dims;
    if (!dims.is_static())
      return invalid_argument("input '", t.name, "' has dynamic shape ", dims.to_string(),
                              ": call set_input_shape first");
    if (!b.address) return invalid_argument("input '", t.name, "' has no address: call set_tensor_address first");
    const size_t bytes = static_cast<size_t>(dims.numel()) * dtype_size(t.value->dtype);
    if (b.capacity != 0 && bytes > b.capacity)
      return invalid_argument("input '", t.name, "' of shape ", dims.to_string(), " needs ", bytes,
                              " bytes but its address was bound with ", b.capacity);
    // A view of the caller's memory: read in place (host memory of a GPU engine is copied to the GPU).
    const Device where = gpu ? cuda::pointer_info(b.address).device : Device::cpu();
    KILN_RETURN_IF_ERROR(state_->impl->set_input(t.name, Tensor::view(b.address, t.value->dtype, dims, where)));
  }
  if (gpu) {
    KILN_RETURN_IF_ERROR(state_->impl->enqueue(stream, input_consumed));
  } else {
    KILN_RETURN_IF_ERROR(state_->impl->execute(stream));
    // The inputs were read by the (synchronous) run: they may be refilled from here on.
    if (input_consumed) KILN_RETURN_IF_ERROR(input_consumed->record(stream));
  }
  for (const IoTensor& t : info.io) {
    if (t.mode != TensorIOMode::kOutput) continue;
    Binding& b = state_->bindings[t.name];
    KILN_ASSIGN_OR_RETURN(Tensor out, state_->impl->output(t.name));
    if (out.device().is_cpu()) {
      KILN_ASSIGN_OR_RETURN(out, out.contiguous());
    }
    const size_t bytes = out.nbytes();
    // The runtime allocates outputs itself for now, so the result is copied to the caller's memory after
    // the run; once the plan has planned memory, outputs are written in place.
    void* dst = b.address;
    if (b.output_allocator) {
      dst = b.output_allocator->reallocate_output(t.name.c_str(), b.allocated, bytes, 64);
      if (!dst && bytes > 0)
        return Status(StatusCode::kOutOfMemory,
                      str_cat("the output allocator of '", t.name, "' gave no memory for ", bytes, " bytes"));
      b.allocated = dst;
    } else {
      const Dims& built = t.value->dims;
      const size_t limit = b.capacity != 0     ? b.capacity
                           : built.is_static() ? static_cast<size_t>(built.numel()) * dtype_size(t.value->dtype)
                                               : 0;
      if (limit != 0 && bytes > limit)
        return invalid_argument("output '", t.name, "' of shape ", out.dims().to_string(), " needs ", bytes,
                                " bytes but its address holds ", limit,
                                "; bind more memory or use an output allocator");
    }
    if (gpu)
      KILN_RETURN_IF_ERROR(write_output(out, dst, stream));
    else if (bytes > 0)
      std::memmove(dst, out.raw(), bytes);
    b.shape = out.dims();
    if (b.output_allocator) b.output_allocator->notify_shape(t.name.c_str(), out.dims());
  }
  return Status::ok();
}

// ---- Runtime ----

namespace {
Result<std::shared_ptr<EngineInfo>> engine_info(std::shared_ptr<const EngineImpl> impl);
}  // namespace

Result<std::unique_ptr<Engine>> Runtime::deserialize_engine(std::string_view bytes) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const EngineImpl> impl, EngineImpl::deserialize(bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<EngineInfo> info, engine_info(std::move(impl)));
  auto state = std::make_unique<Engine::State>();
  state->info = std::move(info);
  return std::unique_ptr<Engine>(new Engine(std::move(state)));
}

namespace {
// The public engine over a loaded one: its I/O tensors, optimization profiles and verbosity from the header.
Result<std::shared_ptr<EngineInfo>> engine_info(std::shared_ptr<const EngineImpl> impl) {
  auto info = std::make_shared<EngineInfo>();
  const Graph& g = impl->graph();
  for (const Value* v : g.inputs()) info->io.push_back({v->name, v, TensorIOMode::kInput});
  for (const Value* v : g.outputs()) info->io.push_back({v->name, v, TensorIOMode::kOutput});
  const auto& extra = impl->header().extra;
  if (auto it = extra.find(kProfilesHeaderKey); it != extra.end()) {
    KILN_ASSIGN_OR_RETURN(info->profiles, profiles_from_json(it->second));
    for (const auto& [name, range] : info->profiles) {
      const IoTensor* t = info->find(name);
      if (!t || t->mode != TensorIOMode::kInput || range.min.rank() != t->value->dims.rank() ||
          range.max.rank() != t->value->dims.rank())
        return invalid_argument("the engine's optimization profile for '", name,
                                "' does not fit its inputs; rebuild the engine");
    }
  }
  if (auto it = extra.find(kVerbosityHeaderKey); it != extra.end()) {
    KILN_ASSIGN_OR_RETURN(info->verbosity, parse_verbosity(it->second));
  }
  info->impl = std::move(impl);
  return info;
}
}  // namespace

Result<std::unique_ptr<Engine>> Runtime::deserialize_engine(const void* data, size_t size) const {
  if (!data && size > 0) return invalid_argument("deserialize_engine: the engine data is null");
  if (!data) return invalid_argument("deserialize_engine: the engine data is empty; give the bytes of an engine");
  return deserialize_engine(std::string_view(static_cast<const char*>(data), size));
}

Result<std::unique_ptr<Engine>> Runtime::load_engine_file(const std::string& path) const {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status(StatusCode::kIoError,
                  str_cat("cannot read engine file '", path,
                          "': ", std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  // The file is mapped and its weights used in place: loading costs no copy of them.
  auto impl = EngineImpl::load_file(path);
  if (!impl) return impl.take_status().with_prefix(path);
  auto info = engine_info(std::move(*impl));
  if (!info) return info.take_status().with_prefix(path);
  auto state = std::make_unique<Engine::State>();
  state->info = std::move(*info);
  return std::unique_ptr<Engine>(new Engine(std::move(state)));
}

}  // namespace kiln
