// GPU engines: where values live. Constants go up once per engine, graph inputs are copied to the GPU
// (through pinned staging when their memory is pageable) or used in place, and values move between host and
// GPU only when a step on the other side reads them; the moved copy replaces the value for later readers.
#include <cstring>

#include "runtime/engine.h"

namespace kiln {

namespace {

// Keeps a pinned staging buffer alive until the copy queued from it is done (a host function of the stream).
void release_staging(void* p) { delete static_cast<Tensor*>(p); }

Status not_in_capture(Stream& stream, std::string_view what) {
  if (cuda::is_capturing(stream))
    return unsupported(what, " while the stream is captured into a CUDA graph; run it without --useCudaGraph");
  return Status::ok();
}

}  // namespace

Stream& ContextImpl::own_stream() {
  if (!own_stream_) {
    auto s = create_stream(device_);
    if (s) own_stream_ = std::move(*s);
  }
  return own_stream_ ? *own_stream_ : cpu_stream();
}

Status ContextImpl::prepare_run(Stream& stream) {
  if (!stream.device().is_cuda())
    return invalid_argument("this engine runs on ", device_.to_string(),
                            ": enqueue it on a CUDA stream (kiln::create_stream(Device::cuda()))");
  if (stream.device() != device_)
    return invalid_argument("the stream is on ", stream.device().to_string(), " but this engine runs on ",
                            device_.to_string());
  if (!done_) {
    KILN_ASSIGN_OR_RETURN(done_, create_event(device_));
  }
  // Memory the last run freed may still be in use on its stream: a new stream first waits for that run.
  if (last_stream_ && last_stream_ != stream.native_handle() && !cuda::is_capturing(stream))
    KILN_RETURN_IF_ERROR(cuda::stream_wait(stream, *done_));
  return Status::ok();
}

Status ContextImpl::to_device(RuntimeValue& value, Stream& stream) {
  if (value.kind != ValueKind::kTensor && value.kind != ValueKind::kOptionalTensor) return Status::ok();
  Tensor& t = value.tensor;
  if (!t.defined() || t.device().is_cuda() || t.dtype() == DataType::kString) return Status::ok();
  KILN_RETURN_IF_ERROR(not_in_capture(stream, "a host value cannot be copied to the GPU"));
  KILN_ASSIGN_OR_RETURN(Tensor host, t.contiguous());
  KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(host.dtype(), host.dims(), *allocator_, "host-to-device copy"));
  // From pageable memory the copy returns once the driver staged the bytes: `host` may go right after.
  KILN_RETURN_IF_ERROR(cuda::copy(host, d, &stream));
  t = std::move(d);
  return Status::ok();
}

Status ContextImpl::to_host(RuntimeValue& value, Stream& stream) {
  auto down = [&](Tensor& t) -> Status {
    if (!t.defined() || t.device().is_cpu()) return Status::ok();
    KILN_RETURN_IF_ERROR(not_in_capture(stream, "a GPU value cannot be read on the host"));
    KILN_ASSIGN_OR_RETURN(Tensor h, Tensor::empty(t.dtype(), t.dims(), cpu_allocator(), "device-to-host copy"));
    KILN_RETURN_IF_ERROR(cuda::copy(t, h, &stream));
    t = std::move(h);
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(down(value.tensor));
  for (Tensor& item : value.items) KILN_RETURN_IF_ERROR(down(item));
  return Status::ok();
}

Result<Tensor> ContextImpl::fetch(RuntimeValue& value, bool device, Stream& stream) {
  const Tensor& t = value.tensor;
  if (!device_.is_cuda() || !t.defined() || t.device().is_cuda() == device) return t;
  if (device) {
    KILN_RETURN_IF_ERROR(to_device(value, stream));
  } else {
    KILN_RETURN_IF_ERROR(to_host(value, stream));
    KILN_RETURN_IF_ERROR(stream.synchronize());  // the host step reads it next
  }
  return value.tensor;
}

Status ContextImpl::inputs_to_host(const PlanStep& step, Scope& scope, Stream& stream) {
  bool moved = false;
  for (int i : step.in) {
    RuntimeValue* v = i >= 0 ? scope.at(i) : nullptr;
    if (!v) continue;
    bool on_gpu = v->tensor.defined() && v->tensor.device().is_cuda();
    for (const Tensor& item : v->items) on_gpu = on_gpu || item.device().is_cuda();
    if (!on_gpu) continue;
    Status st = to_host(*v, stream);
    if (!st.is_ok()) return std::move(st).with_node(step.node->context());
    moved = true;
  }
  return moved ? stream.synchronize() : Status::ok();
}

Status ContextImpl::upload_inputs(Scope& scope, Stream& stream, bool& all_copied) {
  const GraphPlan& plan = engine_->plan();
  const auto& inputs = engine_->graph().inputs();
  all_copied = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RuntimeValue v = inputs_[i];
    Tensor& t = v.tensor;
    if (v.kind != ValueKind::kTensor || !t.defined() || t.dtype() == DataType::kString || t.numel() == 0) {
      scope.put(plan.input_slots[i], std::move(v));
      continue;
    }
    if (t.device().is_cuda()) {  // the caller's GPU memory, read in place
      all_copied = false;
      scope.put(plan.input_slots[i], std::move(v));
      continue;
    }
    if (cuda::is_capturing(stream))
      return invalid_argument("input '", inputs[i]->name,
                              "' is a host tensor: bind GPU tensors to inputs before capturing a CUDA graph");
    KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(t.dtype(), t.dims(), *allocator_, "input " + inputs[i]->name));
    if (cuda::pointer_info(t.raw()).pinned) {
      KILN_RETURN_IF_ERROR(cuda::copy(t, d, &stream));
    } else {
      // Pageable memory: through a pinned buffer, so the copy itself is asynchronous.
      KILN_ASSIGN_OR_RETURN(Tensor staging,
                            Tensor::empty(t.dtype(), t.dims(), cuda::pinned_allocator(), "input staging"));
      std::memcpy(staging.raw(), t.raw(), t.nbytes());
      KILN_RETURN_IF_ERROR(cuda::copy(staging, d, &stream));
      auto* keep = new Tensor(std::move(staging));
      if (Status st = cuda::launch_host_func(stream, release_staging, keep); !st.is_ok()) {
        KILN_RETURN_IF_ERROR(stream.synchronize());
        delete keep;
        return st;
      }
    }
    t = std::move(d);
    scope.put(plan.input_slots[i], std::move(v));
  }
  return Status::ok();
}

std::string ContextImpl::capture_blocker() const {
  std::function<std::string(const GraphPlan&)> find = [&](const GraphPlan& plan) -> std::string {
    for (const PlanStep& st : plan.steps) {
      if (!st.impl) return str_cat("layer '", st.node->name, "' (", st.node->op(), ") runs on the host");
      if (engine_->is_host_fallback(st))
        return str_cat("layer '", st.node->name, "' (", st.node->op(), ") runs on the host (", st.impl->name,
                       ": no CUDA kernel accepts it)");
      for (const GraphPlan& sub : st.subplans)
        if (std::string why = find(sub); !why.empty()) return why;
    }
    return {};
  };
  if (!device_.is_cuda()) return "the engine runs on the CPU";
  return find(engine_->plan());
}

Result<std::unique_ptr<cuda::GraphExec>> ContextImpl::capture_graph(Stream& stream) {
  if (std::string why = capture_blocker(); !why.empty()) return unsupported("cannot capture a CUDA graph: ", why);
  const auto& inputs = engine_->graph().inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (input_set_[i] && inputs_[i].kind == ValueKind::kTensor && inputs_[i].tensor.defined() &&
        inputs_[i].tensor.numel() > 0 && !inputs_[i].tensor.device().is_cuda())
      return invalid_argument("cannot capture a CUDA graph: input '", inputs[i]->name,
                              "' is a host tensor; bind a GPU tensor, which the graph reads in place");
  KILN_RETURN_IF_ERROR(prepare_run(stream));
  if (last_stream_ && last_stream_ != stream.native_handle()) KILN_RETURN_IF_ERROR(done_->synchronize());
  KILN_RETURN_IF_ERROR(cuda::begin_capture(stream));
  Status st = enqueue(stream);
  auto graph = cuda::end_capture(stream);  // always ends the capture, also after a failure
  if (!st.is_ok()) return std::move(st).with_prefix("while capturing a CUDA graph");
  if (!graph) return graph.take_status();
  last_stream_ = stream.native_handle();
  return graph;
}

}  // namespace kiln
