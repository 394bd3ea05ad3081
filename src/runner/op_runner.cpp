#include "runner/op_runner.h"

#include <algorithm>
#include <chrono>

#include "core/cuda_runtime.h"

namespace kiln {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string input_name(size_t i) { return str_cat("x", i); }

// The op as a graph of one node: each defined input a graph input (or a constant), each output a graph output.
Result<std::unique_ptr<Graph>> op_graph(const OpSpec& spec) {
  const OpSchema* schema = OpRegistry::global().find(spec.op);
  if (!schema) return invalid_argument("no op '", spec.op, "' is registered");
  if (!spec.attrs) return invalid_argument("op '", spec.op, "' is given no attributes");
  auto g = std::make_unique<Graph>();
  std::vector<Value*> inputs;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& t = spec.inputs[i];
    if (!t.defined()) {
      inputs.push_back(nullptr);
      continue;
    }
    if (!t.device().is_cpu())
      return invalid_argument("input ", i, " (", schema->input_name(static_cast<int>(i)), ") of ", spec.op, " is on ",
                              t.device().to_string(), "; give host tensors");
    const int index = static_cast<int>(i);
    const bool constant = contains(schema->value_inputs, index) || contains(spec.constant_inputs, index);
    Result<Value*> v =
        constant ? g->add_constant(str_cat("c", i), t) : g->add_input(input_name(i), t.dtype(), t.dims());
    if (!v) return v.take_status();
    inputs.push_back(*v);
  }
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  KILN_ASSIGN_OR_RETURN(Node * node, g->add_node(spec.op, spec.node_name, spec.attrs->clone(), inputs));
  for (Value* out : node->outputs) KILN_RETURN_IF_ERROR(g->mark_output(out));
  return g;
}

}  // namespace

Result<OpCandidates> OpRunner::candidates(const OpSpec& spec, Backend backend) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, op_graph(spec));
  OpCall call = node_call(*g->nodes().front());
  call.allow_tf32 = spec.allow_tf32;
  OpCandidates out;
  for (const KernelImpl* impl : KernelRegistry::global().find(spec.op, backend)) {
    if (Status ok = impl->supports(call); !ok.is_ok()) {
      out.rejected += str_cat("\n  ", impl->name, ": ", ok.message());
      continue;
    }
    std::vector<std::string> tactics;
    if (impl->tactics)
      for (std::string& t : impl->tactics(call))
        if (!t.empty()) tactics.push_back(std::move(t));
    out.accepted.push_back({impl, std::move(tactics)});
  }
  return out;
}

Result<OpRunner> OpRunner::build(const OpSpec& spec) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, op_graph(spec));
  // A one-node build stays cheap: no optimizer, no timing, no timing cache; the kernel is pinned or the first
  // that accepts the node (no silent fallback to the reference).
  BuildOptions options;
  options.backend = spec.backend;
  options.optimization_level = 0;
  options.passes.enabled = false;
  options.reference_fallback = false;
  options.passes.precision.tf32 = spec.allow_tf32;
  if (spec.pin) options.pinned[spec.node_name] = *spec.pin;
  OpRunner r;
  KILN_ASSIGN_OR_RETURN(r.runner_, GraphRunner::compile(*g, options));
  for (Value* out : g->outputs()) {
    r.outputs_.push_back(out->name);
    r.output_descs_.push_back(out->desc());
  }
  const Device device = r.runner_.engine().device();
  for (Value* in : g->inputs()) {
    const Tensor& host = spec.inputs[std::stoul(in->name.substr(1))];
    if (!device.is_cuda() || host.dtype() == DataType::kString) {
      KILN_RETURN_IF_ERROR(r.runner_.set_input(in->name, host));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(host.dtype(), host.dims(), cuda::device_allocator(device.index)));
    KILN_RETURN_IF_ERROR(cuda::copy(host, d));
    r.kept_.push_back(d);
    KILN_RETURN_IF_ERROR(r.runner_.set_input(in->name, d));
  }
  return r;
}

Status OpRunner::set_output(size_t i, const Tensor& t) {
  if (i >= outputs_.size()) return invalid_argument("the op has ", outputs_.size(), " outputs; there is no output ", i);
  const Device device = runner_.engine().device();
  if (!device.is_cuda() || !t.defined() || !t.device().is_cpu()) return runner_.set_output(outputs_[i], t);
  KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(t.dtype(), t.dims(), cuda::device_allocator(device.index)));
  KILN_RETURN_IF_ERROR(cuda::copy(t, d));
  kept_.push_back(d);
  return runner_.set_output(outputs_[i], d);
}

Result<std::vector<Tensor>> OpRunner::outputs() const {
  std::vector<Tensor> out;
  for (const std::string& name : outputs_) {
    KILN_ASSIGN_OR_RETURN(Tensor t, runner_.output(name));
    if (t.device().is_cuda()) {
      KILN_ASSIGN_OR_RETURN(Tensor h, Tensor::empty(t.dtype(), t.dims()));
      KILN_RETURN_IF_ERROR(cuda::copy(t, h));
      t = std::move(h);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<double> OpRunner::time_us(int iters) {
  if (iters < 1) return invalid_argument("time at least one run, not ", iters);
  const Device device = runner_.engine().device();
  if (device.is_cuda() && !stream_) {
    KILN_ASSIGN_OR_RETURN(stream_, create_stream(device));
  }
  Stream& stream = stream_ ? *stream_ : cpu_stream();
  auto once = [&]() -> Status {
    KILN_RETURN_IF_ERROR(runner_.context().enqueue(stream));
    return stream.synchronize();
  };
  KILN_RETURN_IF_ERROR(once());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) KILN_RETURN_IF_ERROR(once());
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
}

std::string OpRunner::kernel() const {
  const auto& steps = runner_.engine().plan().steps;
  if (steps.empty() || !steps.front().impl) return "host";
  const PlanStep& s = steps.front();
  return s.tactic.empty() ? s.impl->name : str_cat(s.impl->name, "[", s.tactic, "]");
}

Result<std::vector<Tensor>> run_op(const OpSpec& spec) {
  KILN_ASSIGN_OR_RETURN(OpRunner r, OpRunner::build(spec));
  KILN_RETURN_IF_ERROR(r.run());
  return r.outputs();
}

}  // namespace kiln
