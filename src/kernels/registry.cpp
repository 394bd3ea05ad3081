#include "kernels/registry.h"

#include <algorithm>

#include "kiln/logger.h"

namespace kiln {

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::kRef: return "ref";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

std::string OpCall::to_string() const {
  std::string s = schema ? schema->name : "?";
  s += "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].to_string();
  s += ")";
  if (attrs) {
    const std::string a = attrs->to_string();
    if (!a.empty()) s += " {" + a + "}";
  }
  return s;
}

bool is_tf32_tactic(std::string_view tactic) { return tactic.ends_with(kTf32TacticSuffix); }

std::string strip_tf32_suffix(const std::string& tactic) {
  return is_tf32_tactic(tactic) ? tactic.substr(0, tactic.size() - kTf32TacticSuffix.size()) : tactic;
}

bool tf32_tactics_allowed(const OpCall& call) {
  if (!call.allow_tf32) return false;
  bool any = false;
  for (const std::vector<TensorDesc>* list : {&call.inputs, &call.outputs})
    for (const TensorDesc& d : *list) {
      if (!d.present || !is_floating(d.dtype)) continue;
      if (d.dtype != DataType::kFloat32) return false;
      any = true;
    }
  return any;
}

namespace {

class LambdaKernel final : public Kernel {
 public:
  explicit LambdaKernel(RunFn run) : run_(std::move(run)) {}
  Status run(KernelContext& ctx) override { return run_(ctx); }

 private:
  RunFn run_;
};

bool is_low_float(DataType d) { return d == DataType::kFloat16 || d == DataType::kBFloat16; }

OpCall widened(const OpCall& call) {
  OpCall out = call;
  for (auto& t : out.inputs)
    if (t.present && is_low_float(t.dtype)) t.dtype = DataType::kFloat32;
  for (auto& t : out.outputs)
    if (t.present && is_low_float(t.dtype)) t.dtype = DataType::kFloat32;
  return out;
}

Result<Tensor> convert(const Tensor& src, DataType dtype) {
  KILN_ASSIGN_OR_RETURN(Tensor c, src.contiguous());
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(dtype, src.dims()));
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i) out.set(i, c.at(i));
  return out;
}

class WidenedKernel final : public Kernel {
 public:
  WidenedKernel(OpCall call, std::unique_ptr<Kernel> inner) : call_(std::move(call)), inner_(std::move(inner)) {}
  Status run(KernelContext& ctx) override {
    std::vector<Tensor> src = ctx.src, dst = ctx.dst;
    for (auto& t : src)
      if (t.defined() && is_low_float(t.dtype())) {
        KILN_ASSIGN_OR_RETURN(t, convert(t, DataType::kFloat32));
      }
    for (auto& t : dst)
      if (t.defined() && is_low_float(t.dtype())) {
        KILN_ASSIGN_OR_RETURN(t, Tensor::empty(DataType::kFloat32, t.dims()));
      }
    KernelContext wide{call_, src, dst, ctx.stream, ctx.allocator};
    KILN_RETURN_IF_ERROR(inner_->run(wide));
    for (size_t i = 0; i < dst.size(); ++i) {
      Tensor& out = ctx.dst[i];
      if (!out.defined() || !is_low_float(out.dtype())) continue;
      const Tensor& w = wide.dst[i];
      for (int64_t k = 0; k < out.numel(); ++k) out.set(k, w.at(k));
    }
    return Status::ok();
  }

 private:
  OpCall call_;
  std::unique_ptr<Kernel> inner_;
};

}  // namespace

CreateFn stateless(RunFn run) {
  return [run = std::move(run)](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<LambdaKernel>(run));
  };
}

InPlaceFn in_place(int input) {
  return [input](std::string_view) { return input; };
}

Status require_float_dtypes(const OpCall& call, std::initializer_list<DataType> dtypes) {
  auto check = [&](const TensorDesc& t, std::string_view what, size_t i) -> Status {
    if (!t.present || !is_floating(t.dtype)) return Status::ok();
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype) != dtypes.end()) return Status::ok();
    return unsupported(what, " ", i, " is ", dtype_name(t.dtype));
  };
  for (size_t i = 0; i < call.inputs.size(); ++i) KILN_RETURN_IF_ERROR(check(call.inputs[i], "input", i));
  for (size_t i = 0; i < call.outputs.size(); ++i) KILN_RETURN_IF_ERROR(check(call.outputs[i], "output", i));
  return Status::ok();
}

Status reject_fp8(const OpCall& call) {
  for (const TensorDesc& t : call.inputs)
    if (t.present && t.dtype == DataType::kFp8E4M3) return unsupported("fp8 tensors are not supported");
  return Status::ok();
}

Status require_dtypes(const OpCall& call, std::initializer_list<DataType> dtypes) {
  auto check = [&](const TensorDesc& t, std::string_view what, size_t i) -> Status {
    if (!t.present || std::find(dtypes.begin(), dtypes.end(), t.dtype) != dtypes.end()) return Status::ok();
    return unsupported(what, " ", i, " is ", dtype_name(t.dtype));
  };
  for (size_t i = 0; i < call.inputs.size(); ++i) KILN_RETURN_IF_ERROR(check(call.inputs[i], "input", i));
  for (size_t i = 0; i < call.outputs.size(); ++i) KILN_RETURN_IF_ERROR(check(call.outputs[i], "output", i));
  return Status::ok();
}

KernelImpl with_float32_compute(KernelImpl impl) {
  auto inner_supports = impl.supports;
  auto inner_create = impl.create;
  impl.supports = [inner_supports](const OpCall& call) { return inner_supports(widened(call)); };
  impl.create = [inner_create](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
    OpCall wide = widened(call);
    KILN_ASSIGN_OR_RETURN(auto inner, inner_create(wide));
    bool needs_widening = false;
    for (auto& t : call.inputs) needs_widening |= t.present && is_low_float(t.dtype);
    for (auto& t : call.outputs) needs_widening |= t.present && is_low_float(t.dtype);
    if (!needs_widening) return inner;
    return std::unique_ptr<Kernel>(std::make_unique<WidenedKernel>(std::move(wide), std::move(inner)));
  };
  return impl;
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* registry = new KernelRegistry;
  return *registry;
}

bool KernelRegistry::add(KernelImpl impl) {
  for (auto& existing : impls_) {
    if (existing->name == impl.name) {
      log_error("kernel '", impl.name, "' is registered twice; keeping the first");
      return false;
    }
  }
  impls_.push_back(std::make_unique<KernelImpl>(std::move(impl)));
  return true;
}

std::vector<const KernelImpl*> KernelRegistry::find(std::string_view op, Backend backend) const {
  std::vector<const KernelImpl*> out;
  for (auto& k : impls_)
    if (k->op == op && k->backend == backend) out.push_back(k.get());
  std::stable_sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->priority > b->priority; });
  return out;
}

std::vector<const KernelImpl*> KernelRegistry::all() const {
  std::vector<const KernelImpl*> out;
  for (auto& k : impls_) out.push_back(k.get());
  return out;
}

Result<const KernelImpl*> KernelRegistry::select(const OpCall& call, Backend backend) const {
  const std::string op = call.schema ? call.schema->name : "";
  auto impls = find(op, backend);
  if (impls.empty()) return unsupported("no ", backend_name(backend), " kernel is registered for ", op);
  std::string reasons;
  for (const KernelImpl* k : impls) {
    Status s = k->supports(call);
    if (s.is_ok()) {
      log_verbose("selected ", k->name, " for ", call.to_string());
      return k;
    }
    reasons += str_cat("; ", k->name, ": ", s.message());
    log_verbose(k->name, " rejects ", call.to_string(), ": ", s.message());
  }
  return unsupported("no ", backend_name(backend), " kernel accepts ", call.to_string(), reasons);
}

void pad_optional_inputs(const OpSchema& schema, std::vector<TensorDesc>& inputs, std::vector<Tensor>& src) {
  if (schema.max_inputs < 0) return;
  while (static_cast<int>(inputs.size()) < schema.max_inputs) inputs.push_back(TensorDesc::absent());
  while (static_cast<int>(src.size()) < schema.max_inputs) src.emplace_back();
}

Status run_once(const OpCall& call, Backend backend, std::vector<Tensor> src, std::vector<Tensor>& dst) {
  OpCall padded = call;
  if (call.schema) pad_optional_inputs(*call.schema, padded.inputs, src);
  KILN_ASSIGN_OR_RETURN(const KernelImpl* impl, KernelRegistry::global().select(padded, backend));
  KILN_ASSIGN_OR_RETURN(auto kernel, impl->create(padded));
  KernelContext ctx{padded, std::move(src), dst, cpu_stream(), cpu_allocator()};
  KILN_RETURN_IF_ERROR(kernel->run(ctx));
  dst = std::move(ctx.dst);
  return Status::ok();
}

}  // namespace kiln
