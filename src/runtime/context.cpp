// The execution context: binds inputs, specializes the top-level plan to the inputs' shapes (static
// kernel calls and one activation block placed by liveness), and runs the steps.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/cpu/threads.h"
#include "runtime/engine.h"

namespace kiln {

namespace {

constexpr size_t kBlockAlignment = 64;

OpCall build_time_call(const PlanStep& step) {
  const Node& n = *step.node;
  OpCall call{n.schema, n.attrs.get(), {}, {}};
  call.tactic = step.tactic;
  call.prepared = step.prepared.defined() ? &step.prepared : nullptr;
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

bool fixed_size(const TensorDesc& d) { return d.kind == ValueKind::kTensor && d.dims.is_static(); }

}  // namespace

const RuntimeValue* Scope::get(const Value* v) const {
  auto it = plan_->slot_of.find(v);
  if (it == plan_->slot_of.end()) return nullptr;
  const Slot& s = slots_[it->second];
  return s.has ? &s.value : nullptr;
}

void Scope::put(const Value* v, RuntimeValue value) {
  auto it = plan_->slot_of.find(v);
  if (it != plan_->slot_of.end()) put(it->second, std::move(value));
}

ContextImpl::ContextImpl(std::shared_ptr<const EngineImpl> engine) : engine_(std::move(engine)) {
  device_ = engine_->device();
  if (device_.is_cuda()) {
    // A cache of its own: its blocks are reused in the order of the context's stream, never by another stream.
    device_cache_ = cuda::make_device_cache(device_.index);
    allocator_ = device_cache_.get();
  }
  kernels_.resize(static_cast<size_t>(engine_->step_count()));
  kernel_threads_ = cpu_threads();
  for (const PlanStep& st : engine_->plan().steps) {
    if (!st.impl) continue;
    auto k = st.impl->create(build_time_call(st));
    if (k) kernels_[st.id] = std::move(*k);  // a failure is reported when the step runs
  }
  const size_t ins = engine_->graph().inputs().size(), outs = engine_->graph().outputs().size();
  inputs_.resize(ins);
  input_set_.assign(ins, 0);
  outputs_.resize(outs);
  output_set_.assign(outs, 0);
  bound_outputs_.resize(outs);
}

ContextImpl::~ContextImpl() {
  if (done_) (void)done_->synchronize();  // the GPU may still use the memory freed below
  kernels_.clear();
  inputs_.clear();
  outputs_.clear();
  own_block_ = Tensor();
  // Outputs handed out may still hold blocks of the cache: then it stays (its cached blocks given back).
  if (device_cache_ && device_cache_->stats().in_use_blocks > 0) {
    device_cache_->release_cache();
    (void)device_cache_.release();
  }
}

// oneDNN primitives fix their team size when they are made (its OpenMP build reads it then): kernels made under
// another thread count than the run's are made again, once, as the steps reach them.
void ContextImpl::match_kernel_threads() {
  const int threads = cpu_threads();
  if (threads == kernel_threads_ || device_.is_cuda()) return;
  for (auto& kernel : kernels_) kernel.reset();
  kernel_threads_ = threads;
}

Result<Kernel*> ContextImpl::kernel_for(const PlanStep& step) {
  auto& kernel = kernels_[step.id];
  if (!kernel) {
    auto k = step.impl->create(build_time_call(step));
    if (!k) return k.take_status().with_node(step.node->context());
    kernel = std::move(*k);
  }
  return kernel.get();
}

Status ContextImpl::set_input(const std::string& name, Tensor value) {
  return set_input_value(name, RuntimeValue::of(std::move(value)));
}

Status ContextImpl::set_input_value(const std::string& name, RuntimeValue value) {
  const auto& inputs = engine_->graph().inputs();
  size_t index = inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->name == name) index = i;
  if (index == inputs.size()) {
    std::string names;
    for (auto& n : engine_->input_names()) names += (names.empty() ? "" : ", ") + n;
    return invalid_argument("the engine has no input '", name, "' (inputs: ", names, ")");
  }
  const Value* in = inputs[index];
  if (value.kind != in->kind)
    return invalid_argument("input '", name, "' must be a ", value_kind_name(in->kind), " but is a ",
                            value_kind_name(value.kind));
  if (in->kind != ValueKind::kTensor) {
    for (const Tensor& t : value.items)
      if (t.dtype() != in->dtype || !t.device().is_cpu())
        return invalid_argument("input '", name, "' must hold host ", dtype_name(in->dtype), " tensors");
    inputs_[index] = std::move(value);
    input_set_[index] = 1;
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
  if (!t.device().is_cpu()) {
    if (t.device() != device_)
      return unsupported("input '", name, "' is a ", t.device().to_string(), " tensor but this engine runs on ",
                         device_.to_string(), "; give a host tensor",
                         device_.is_cuda() ? str_cat(" or one on ", device_.to_string()) : std::string());
    if (!t.is_contiguous())
      return invalid_argument("input '", name, "' is a non-contiguous GPU tensor; give a contiguous one");
    inputs_[index] = RuntimeValue::of(t);
    input_set_[index] = 1;
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
  inputs_[index] = RuntimeValue::of(std::move(c));
  input_set_[index] = 1;
  return Status::ok();
}

Status ContextImpl::set_output(const std::string& name, Tensor value) {
  const auto& outputs = engine_->graph().outputs();
  size_t index = outputs.size();
  for (size_t i = 0; i < outputs.size() && index == outputs.size(); ++i)
    if (outputs[i]->name == name) index = i;
  if (index == outputs.size()) {
    std::string names;
    for (auto& n : engine_->output_names()) names += (names.empty() ? "" : ", ") + n;
    return invalid_argument("the engine has no output '", name, "' (outputs: ", names, ")");
  }
  if (!value.defined()) {
    bound_outputs_[index] = Tensor();
    return Status::ok();
  }
  const Value* out = outputs[index];
  if (out->kind != ValueKind::kTensor)
    return invalid_argument("output '", name, "' is a ", value_kind_name(out->kind),
                            "; only tensor outputs can be bound");
  if (value.dtype() != out->dtype)
    return invalid_argument("output '", name, "' is ", dtype_name(out->dtype), " but the tensor bound to it is ",
                            dtype_name(value.dtype()));
  bool agrees = value.rank() == out->dims.rank();
  for (int i = 0; agrees && i < value.rank(); ++i) agrees = out->dims[i] < 0 || out->dims[i] == value.dims()[i];
  if (!agrees)
    return invalid_argument("output '", name, "' has shape ", out->dims.to_string(), " but the tensor bound to it has ",
                            value.dims().to_string());
  if (!value.is_contiguous()) return invalid_argument("the tensor bound to output '", name, "' must be contiguous");
  if (!value.device().is_cpu() && value.device() != device_)
    return unsupported("the tensor bound to output '", name, "' is on ", value.device().to_string(),
                       " but this engine runs on ", device_.to_string(), "; give a host tensor",
                       device_.is_cuda() ? str_cat(" or one on ", device_.to_string()) : std::string());
  bound_outputs_[index] = std::move(value);
  return Status::ok();
}

Result<Tensor*> ContextImpl::bound_output(const GraphPlan& plan, int slot, const TensorDesc& desc, Device where) {
  if (&plan != &engine_->plan()) return nullptr;
  for (size_t i = 0; i < plan.output_slots.size(); ++i) {
    Tensor& t = bound_outputs_[i];
    if (plan.output_slots[i] != slot || !t.defined()) continue;
    if (t.dims() != desc.dims)
      return invalid_argument("output '", engine_->graph().outputs()[i]->name, "' is bound to a tensor of shape ",
                              t.dims().to_string(), " but this run computes ", desc.dims.to_string());
    return t.device() == where ? &t : nullptr;
  }
  return nullptr;
}

Status ContextImpl::store_bound_outputs(Stream& stream) {
  const auto& outputs = engine_->graph().outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& bound = bound_outputs_[i];
    if (!bound.defined() || !output_set_[i]) continue;
    RuntimeValue& v = outputs_[i];
    if (v.tensor.raw() != bound.raw() || v.tensor.dims() != bound.dims()) {
      if (v.kind != ValueKind::kTensor || v.tensor.dtype() != bound.dtype() || v.tensor.dims() != bound.dims())
        return invalid_argument("output '", outputs[i]->name, "' is bound to a tensor of shape ",
                                bound.dims().to_string(), " but this run computes ", v.tensor.describe());
      KILN_ASSIGN_OR_RETURN(Tensor src, v.tensor.contiguous());
      if (src.device().is_cpu() && bound.device().is_cpu()) {
        if (src.nbytes()) std::memcpy(bound.raw(), src.raw(), src.nbytes());
      } else {
        KILN_RETURN_IF_ERROR(cuda::copy(src, bound, &stream));
      }
    }
    v = RuntimeValue::of(bound);
  }
  return Status::ok();
}

void ContextImpl::set_activation_memory(void* data, size_t bytes) {
  user_block_ = data;
  user_block_bytes_ = data ? bytes : 0;
}

namespace {

// The block output 0 of step `s` may share (KernelImpl::in_place_input), or -1: the input's own block, when that input
// is a planned intermediate of the output's size, this step is its last reader, and it is no other input of the step.
int in_place_block(const GraphPlan& plan, int s, size_t bytes, const std::vector<MemoryBlock>& blocks,
                   const std::vector<int>& block_of) {
  const PlanStep& st = plan.steps[static_cast<size_t>(s)];
  const int k = st.impl->in_place_input ? st.impl->in_place_input(st.tactic) : -1;
  if (k < 0 || k >= static_cast<int>(st.in.size()) || st.in[static_cast<size_t>(k)] < 0) return -1;
  const int in = st.in[static_cast<size_t>(k)];
  const int block = block_of[static_cast<size_t>(in)];
  if (block < 0 || plan.last_reader[static_cast<size_t>(in)] != s || blocks[static_cast<size_t>(block)].bytes != bytes)
    return -1;
  for (size_t i = 0; i < st.in.size(); ++i)
    if (static_cast<int>(i) != k && st.in[i] == in) return -1;
  return block;
}

}  // namespace

// Shape inference over the top-level plan for these input shapes, without running anything. A step
// whose output shapes follow from shapes and constants alone gets a static call; its intermediates
// (unless a host op reads them, which may keep them beyond their last reader) go into the block.
Status ContextImpl::specialize(const std::vector<Dims>& input_dims) {
  const GraphPlan& plan = engine_->plan();
  auto spec = std::make_unique<Specialized>();
  spec->input_dims = input_dims;
  const auto slots = static_cast<size_t>(plan.slot_count);
  spec->desc.assign(slots, TensorDesc::absent());
  spec->offset.assign(slots, -1);
  std::vector<const Tensor*> known(slots, nullptr);
  std::vector<char> is_static(slots, 0);
  for (const auto& [slot, t] : plan.constants) {  // a prepared-only constant has no data: its value's desc
    spec->desc[slot] = t.defined() ? TensorDesc{t.dtype(), t.dims(), true} : plan.value_of[slot]->desc();
    known[slot] = t.defined() ? &t : nullptr;
    is_static[slot] = 1;
  }
  const auto& inputs = engine_->graph().inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int slot = plan.input_slots[i];
    spec->desc[slot] = {inputs[i]->dtype, input_dims[i], true, inputs[i]->kind};
    is_static[slot] = fixed_size(spec->desc[slot]) ? 1 : 0;
  }
  spec->calls.resize(plan.steps.size());
  std::vector<char> is_output(slots, 0);
  for (int o : plan.output_slots) is_output[o] = 1;
  std::vector<MemoryBlock> blocks;
  std::vector<int> block_of(slots, -1);  // per slot: its block, when planned
  size_t in_place_bytes = 0;             // what the outputs placed in place would take in their own allocations
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& st = plan.steps[s];
    if (!st.impl) continue;
    const Node& node = *st.node;
    OpCall call{node.schema, node.attrs.get(), {}, {}};
    std::vector<const Tensor*> values;
    bool ready = true;
    for (int i : st.in) {
      if (i < 0) {
        call.inputs.push_back(TensorDesc::absent());
        values.push_back(nullptr);
        continue;
      }
      ready = ready && is_static[i];
      call.inputs.push_back(spec->desc[i]);
      values.push_back(known[i]);
    }
    for (int v : node.schema->value_inputs)
      if (v < static_cast<int>(st.in.size()) && st.in[v] >= 0 && !known[st.in[v]]) ready = false;
    if (!ready) continue;
    auto outs = node.schema->infer_outputs(InferContext(*node.attrs, call.inputs, values));
    if (!outs || outs->size() != st.out.size() || !std::all_of(outs->begin(), outs->end(), fixed_size)) continue;
    call.outputs = *outs;
    std::vector<Tensor> unused;
    pad_optional_inputs(*node.schema, call.inputs, unused);
    for (size_t o = 0; o < st.out.size(); ++o) {
      const int slot = st.out[o];
      spec->desc[slot] = call.outputs[o];
      is_static[slot] = 1;
      if (is_output[slot] || plan.read_by_host[slot]) continue;
      const size_t bytes = static_cast<size_t>(call.outputs[o].dims.numel()) * dtype_size(call.outputs[o].dtype);
      const int last = std::max(plan.last_reader[slot], static_cast<int>(s));
      if (const int shared = o == 0 ? in_place_block(plan, static_cast<int>(s), bytes, blocks, block_of) : -1;
          shared >= 0) {
        blocks[static_cast<size_t>(shared)].last = std::max(blocks[static_cast<size_t>(shared)].last, last);
        block_of[slot] = shared;
        ++spec->memory.in_place_values;
        in_place_bytes += (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
        continue;
      }
      block_of[slot] = static_cast<int>(blocks.size());
      blocks.push_back({bytes, static_cast<int>(s), last});
    }
    spec->calls[s] = std::move(call);
  }
  const MemoryPlan placed = plan_memory(blocks, kBlockAlignment);
  for (size_t slot = 0; slot < slots; ++slot)
    if (block_of[slot] >= 0)
      spec->offset[slot] = static_cast<int64_t>(placed.offsets[static_cast<size_t>(block_of[slot])]);
  spec->memory.planned_bytes = placed.total;
  spec->memory.unplanned_bytes = placed.unplanned + in_place_bytes;
  spec->memory.planned_values = static_cast<int>(blocks.size()) + spec->memory.in_place_values;
  for (size_t s = 0; s < plan.steps.size(); ++s)
    if (!spec->calls[s].schema)
      for (int o : plan.steps[s].out)
        if (!is_output[o]) ++spec->memory.dynamic_values;
  spec_ = std::move(spec);
  return Status::ok();
}

Result<MemoryReport> ContextImpl::memory_report() {
  std::vector<Dims> dims;
  const auto& inputs = engine_->graph().inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (input_set_[i] && inputs_[i].kind == ValueKind::kTensor) {
      dims.push_back(inputs_[i].tensor.dims());
    } else if (inputs[i]->dims.is_static() || inputs[i]->kind != ValueKind::kTensor) {
      dims.push_back(inputs[i]->dims);
    } else {
      return invalid_argument("input '", inputs[i]->name, "' has dynamic shape ", inputs[i]->dims.to_string(),
                              ": set it first to plan the memory for its shape");
    }
  }
  if (!spec_ || spec_->input_dims != dims) KILN_RETURN_IF_ERROR(specialize(dims));
  return spec_->memory;
}

Status ContextImpl::run_static(const PlanStep& step, const OpCall& call, Scope& scope, Stream& stream) {
  const Node& node = *step.node;
  KILN_ASSIGN_OR_RETURN(Kernel * kernel, kernel_for(step));
  const bool device = on_device(step);
  std::vector<Tensor> src;
  src.reserve(call.inputs.size());
  for (int i : step.in) {
    if (i < 0) {
      src.emplace_back();
      continue;
    }
    RuntimeValue* v = scope.at(i);
    if (!v || v->kind != ValueKind::kTensor)
      return internal_error("input slot ", i, " has no tensor").with_node(node.context());
    if (!device_.is_cuda()) {
      src.push_back(v->tensor);
      continue;
    }
    auto t = fetch(*v, device, stream);
    if (!t) return t.take_status().with_node(node.context());
    src.push_back(std::move(*t));
  }
  src.resize(call.inputs.size());
  std::vector<Tensor> dst;
  dst.reserve(call.outputs.size());
  // A host step of a GPU engine writes host tensors; they move to the GPU when a GPU step reads them.
  const bool host_fallback = device_.is_cuda() && !device;
  Allocator& alloc = host_fallback ? cpu_allocator() : *allocator_;
  char* block = static_cast<char*>(user_block_ ? user_block_ : own_block_.raw());
  const Device where = host_fallback ? Device::cpu() : device_;
  for (size_t o = 0; o < call.outputs.size(); ++o) {
    const TensorDesc& d = call.outputs[o];
    auto bound = bound_output(scope.plan(), step.out[o], d, where);
    if (!bound) return bound.take_status().with_node(node.context());
    if (*bound) {
      dst.push_back(**bound);
      continue;
    }
    const int64_t off = spec_->offset[step.out[o]];
    if (off >= 0 && !host_fallback) {
      dst.push_back(Tensor::view(block + off, d.dtype, d.dims, device_));
      continue;
    }
    auto t = Tensor::empty(d.dtype, d.dims, alloc, node.name);
    if (!t) return t.take_status().with_node(node.context());
    dst.push_back(std::move(*t));
  }
  return run_and_store(*kernel, step, call, std::move(src), std::move(dst), scope, stream);
}

// Runs the step's kernel on `src` into `dst` and puts the outputs in their slots.
Status ContextImpl::run_and_store(Kernel& kernel, const PlanStep& step, const OpCall& call, std::vector<Tensor> src,
                                  std::vector<Tensor> dst, Scope& scope, Stream& stream) {
  const bool host_fallback = device_.is_cuda() && !on_device(step);
  KernelContext ctx{call, std::move(src), std::move(dst), host_fallback ? cpu_stream() : stream,
                    host_fallback ? cpu_allocator() : *allocator_};
  Status st = kernel.run(ctx);
  if (!st.is_ok()) return std::move(st).with_node(step.node->context());
  for (size_t o = 0; o < step.out.size() && o < ctx.dst.size(); ++o)
    scope.put(step.out[o], RuntimeValue::of(std::move(ctx.dst[o])));
  return Status::ok();
}

// A step whose shapes are known only now: infer them from the actual inputs (values included).
Status ContextImpl::run_kernel(const PlanStep& step, Scope& scope, Stream& stream) {
  const Node& node = *step.node;
  KILN_ASSIGN_OR_RETURN(Kernel * kernel, kernel_for(step));
  OpCall call{node.schema, node.attrs.get(), {}, {}};
  const bool device = on_device(step);
  std::vector<Tensor> src;
  std::vector<const Tensor*> values;
  for (size_t k = 0; k < step.in.size(); ++k) {
    const int i = step.in[k];
    if (i < 0) {
      call.inputs.push_back(TensorDesc::absent());
      src.emplace_back();
      continue;
    }
    RuntimeValue* v = scope.at(i);
    const Value* in = node.inputs[k];
    if (!v) return internal_error("input '", in->name, "' has no value").with_node(node.context());
    if (v->kind != ValueKind::kTensor)
      return invalid_argument("input '", in->name, "' is a ", value_kind_name(v->kind), "; a tensor is needed")
          .with_node(node.context());
    // A constant the engine holds only as the step's prepared data has no tensor: its desc is the value's.
    call.inputs.push_back(in->prepared_only ? in->desc() : TensorDesc{v->tensor.dtype(), v->tensor.dims(), true});
    if (!device_.is_cuda()) {
      src.push_back(v->tensor);
      continue;
    }
    auto t = fetch(*v, device, stream);
    if (!t) return t.take_status().with_node(node.context());
    src.push_back(std::move(*t));
  }
  values.reserve(src.size());
  for (const Tensor& t : src) values.push_back(t.defined() ? &t : nullptr);
  // Shape inference reads values on the host: GPU tensors it must read (value inputs) are copied down.
  std::vector<Tensor> host_values;
  if (device_.is_cuda()) {
    host_values.resize(src.size());
    for (size_t k = 0; k < src.size(); ++k) {
      if (!values[k] || src[k].device().is_cpu()) continue;
      values[k] = nullptr;
      const auto& vi = node.schema->value_inputs;
      if (std::find(vi.begin(), vi.end(), static_cast<int>(k)) == vi.end()) continue;
      RuntimeValue copy = RuntimeValue::of(src[k]);
      Status st = to_host(copy, stream);
      if (st.is_ok()) st = stream.synchronize();
      if (!st.is_ok()) return std::move(st).with_node(node.context());
      host_values[k] = copy.tensor;
      values[k] = &host_values[k];
    }
  }
  auto outs = node.schema->infer_outputs(InferContext(*node.attrs, call.inputs, values));
  if (!outs) return outs.take_status().with_node(node.context());
  call.outputs = *outs;
  pad_optional_inputs(*node.schema, call.inputs, src);
  std::vector<Tensor> dst;
  Allocator& alloc = device_.is_cuda() && !device ? cpu_allocator() : *allocator_;
  const Device where = device_.is_cuda() && !device ? Device::cpu() : device_;
  for (size_t o = 0; o < call.outputs.size(); ++o) {
    const TensorDesc& d = call.outputs[o];
    if (!d.dims.is_static())
      return internal_error("output shape ", d.dims.to_string(), " is still unknown at run time")
          .with_node(node.context());
    auto bound = o < step.out.size() ? bound_output(scope.plan(), step.out[o], d, where) : Result<Tensor*>(nullptr);
    if (!bound) return bound.take_status().with_node(node.context());
    if (*bound) {
      dst.push_back(**bound);
      continue;
    }
    auto t = Tensor::empty(d.dtype, d.dims, alloc, node.name);
    if (!t) return t.take_status().with_node(node.context());
    dst.push_back(std::move(*t));
  }
  return run_and_store(*kernel, step, call, std::move(src), std::move(dst), scope, stream);
}

Status ContextImpl::run_plan(const GraphPlan& plan, Scope& scope, Stream& stream, int depth) {
  const bool top = depth == 0 && &plan == &engine_->plan();
  const bool timed = layer_timer_ && top;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& step = plan.steps[s];
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (!step.impl && device_.is_cuda()) KILN_RETURN_IF_ERROR(inputs_to_host(step, scope, stream));
    Status st = !step.impl                      ? run_host_op(*this, step, scope, stream, depth)
                : top && spec_->calls[s].schema ? run_static(step, spec_->calls[s], scope, stream)
                                                : run_kernel(step, scope, stream);
    if (!st.is_ok()) return st;
    if (timed) {
      KILN_RETURN_IF_ERROR(stream.synchronize());
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      layer_timer_(step.node->name, step.impl ? std::string_view(step.impl->name) : "host", ms);
    }
    // Intermediates are released after their last reader, so a run holds only what is still needed.
    for (int v : plan.release[s]) scope.erase(v);
  }
  return Status::ok();
}

Result<std::vector<RuntimeValue>> ContextImpl::call_subgraph(const PlanStep& step, size_t sub, const Scope& scope,
                                                             std::vector<RuntimeValue> args, Stream& stream,
                                                             int depth) {
  const Node& owner = *step.node;
  const Subgraph& sg = owner.subgraphs.at(sub);
  const GraphPlan& plan = step.subplans.at(sub);
  const Graph& g = *plan.graph;
  auto fail = [&](const Status& s) { return subgraph_error(owner, sg.name, s); };
  if (depth > 64) return fail(invalid_argument("subgraphs nest too deeply"));
  Scope local(plan);
  for (const auto& [slot, t] : plan.constants) local.put(slot, RuntimeValue::of(t));
  for (Value* c : g.captures()) {
    const Value* outer = nullptr;
    for (Value* in : owner.inputs)
      if (in && in->name == c->name) outer = in;
    const RuntimeValue* v = outer ? scope.get(outer) : nullptr;
    if (!v) return fail(internal_error("captured value '", c->name, "' has no value"));
    local.put(c, *v);
  }
  if (args.size() != plan.input_slots.size())
    return fail(internal_error("the subgraph takes ", plan.input_slots.size(), " inputs but gets ", args.size()));
  for (size_t i = 0; i < args.size(); ++i) local.put(plan.input_slots[i], std::move(args[i]));
  Status s = run_plan(plan, local, stream, depth + 1);
  if (!s.is_ok()) return fail(s);
  std::vector<RuntimeValue> out;
  for (size_t i = 0; i < plan.output_slots.size(); ++i) {
    const RuntimeValue* v = local.at(plan.output_slots[i]);
    if (!v) return fail(internal_error("output '", g.outputs()[i]->name, "' was not computed"));
    out.push_back(*v);
    if (device_.is_cuda())
      if (Status st = to_host(out.back(), stream); !st.is_ok()) return fail(st);
  }
  // The host op that called reads the results now.
  if (device_.is_cuda())
    if (Status st = stream.synchronize(); !st.is_ok()) return fail(st);
  return out;
}

Status ContextImpl::execute(Stream& stream) {
  if (!device_.is_cuda()) return enqueue(stream);
  Stream& s = stream.device().is_cuda() ? stream : own_stream();
  KILN_RETURN_IF_ERROR(enqueue(s));
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (output_set_[i]) KILN_RETURN_IF_ERROR(to_host(outputs_[i], s));
  return s.synchronize();
}

Status ContextImpl::enqueue(Stream& stream, Event* input_consumed) {
  const GraphPlan& plan = engine_->plan();
  const auto& inputs = engine_->graph().inputs();
  std::vector<Dims> dims;
  dims.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!input_set_[i]) return invalid_argument("input '", inputs[i]->name, "' has not been set");
    dims.push_back(inputs_[i].kind == ValueKind::kTensor ? inputs_[i].tensor.dims() : inputs[i]->dims);
  }
  if (!spec_ || spec_->input_dims != dims) {
    KILN_RETURN_IF_ERROR(specialize(dims));
    own_block_ = Tensor();
  }
  const size_t need = spec_->memory.planned_bytes;
  if (user_block_) {
    if (user_block_bytes_ < need)
      return invalid_argument("the activation memory given to the context holds ", user_block_bytes_,
                              " bytes but these input shapes need ", need,
                              ": give at least that much, or none and the context allocates its own");
    if (reinterpret_cast<uintptr_t>(user_block_) % kBlockAlignment != 0)
      return invalid_argument("the activation memory given to the context must be ", kBlockAlignment, "-byte aligned");
  } else if (need > 0 && (!own_block_.defined() || own_block_.nbytes() < need)) {
    KILN_ASSIGN_OR_RETURN(
        own_block_, Tensor::empty(DataType::kUInt8, Dims{static_cast<int64_t>(need)}, *allocator_, "activations"));
  }
  // One thread count for every CPU kernel of the run (oneDNN's and kiln's own), the caller's back afterwards.
  const CpuThreadsScope threads_scope(threads_);
  match_kernel_threads();
  Scope scope(plan);
  for (const auto& [slot, t] : plan.constants) scope.put(slot, RuntimeValue::of(t));
  if (!device_.is_cuda()) {
    for (size_t i = 0; i < inputs.size(); ++i) scope.put(plan.input_slots[i], inputs_[i]);
    KILN_RETURN_IF_ERROR(run_plan(plan, scope, stream, 0));
    for (size_t i = 0; i < plan.output_slots.size(); ++i) {
      const RuntimeValue* v = scope.at(plan.output_slots[i]);
      output_set_[i] = v ? 1 : 0;
      if (v) outputs_[i] = *v;
    }
    KILN_RETURN_IF_ERROR(store_bound_outputs(stream));
    KILN_RETURN_IF_ERROR(stream.synchronize());
    return input_consumed ? input_consumed->record(stream) : Status::ok();
  }
  // On the GPU: nothing waits for the stream unless a step needs host data.
  KILN_RETURN_IF_ERROR(prepare_run(stream));
  const bool capturing = cuda::is_capturing(stream);
  KILN_ASSIGN_OR_RETURN(const auto* constants, engine_->device_constants());
  for (const auto& [slot, t] : *constants) scope.put(slot, RuntimeValue::of(t));
  bool all_copied = false;
  KILN_RETURN_IF_ERROR(upload_inputs(scope, stream, all_copied));
  if (input_consumed && all_copied && !capturing) KILN_RETURN_IF_ERROR(input_consumed->record(stream));
  KILN_RETURN_IF_ERROR(run_plan(plan, scope, stream, 0));
  for (size_t i = 0; i < plan.output_slots.size(); ++i) {
    const RuntimeValue* v = scope.at(plan.output_slots[i]);
    output_set_[i] = v ? 1 : 0;
    if (v) outputs_[i] = *v;
  }
  KILN_RETURN_IF_ERROR(store_bound_outputs(stream));
  if (capturing) return Status::ok();
  if (input_consumed && !all_copied) KILN_RETURN_IF_ERROR(input_consumed->record(stream));
  KILN_RETURN_IF_ERROR(done_->record(stream));
  last_stream_ = stream.native_handle();
  return Status::ok();
}

Result<RuntimeValue> ContextImpl::output_value(const std::string& name) const {
  const auto& outputs = engine_->graph().outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i]->name != name) continue;
    if (!output_set_[i]) return invalid_argument("output '", name, "' has not been computed: call execute first");
    return outputs_[i];
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
