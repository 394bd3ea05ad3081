#include "train/optim/gradients.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda_runtime.h"
#include "train/optim/device.h"
#include "train/optim/loops.h"
#include "train/optim/rules.h"

namespace kiln::train {
namespace {

double sum_abs_pow(const float* x, int64_t n, double p) {
  std::vector<double> partial(static_cast<size_t>(loops::chunk_count(n)), 0.0);
  loops::for_chunks(n, [&](int64_t b, int64_t e) {
    double s = 0;
    for (int64_t i = b; i < e; ++i) s += std::pow(std::abs(static_cast<double>(x[i])), p);
    partial[static_cast<size_t>(b / loops::kChunk)] = s;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

bool on_device(const std::vector<Parameter>& params) { return !params.empty() && params[0].value.device().is_cuda(); }

/// `count` doubles of device scratch (as int64 elements: there is no float64 tensor type).
Result<Tensor> device_scratch(Device device, int64_t count) {
  return Tensor::empty(DataType::kInt64, Dims{count}, cuda::device_allocator(device.index), "gradient scratch");
}

/// rule(t, i) over every grad (Tensors::p is the grad): the CPU loop or one kernel per grad.
template <class Rule>
Status for_each_grad(std::vector<Parameter>& params, Stream* stream, const Rule& rule) {
  const bool gpu = on_device(params);
  const device::Launch on = gpu ? device::launch_on(params[0].value.device(), stream) : device::Launch{};
  for (Parameter& p : params) {
    if (!p.grad.defined()) continue;
    const rules::Tensors t{p.grad.data<float>()};
    if (gpu) {
      KILN_RETURN_IF_ERROR(device::apply(rule, t, p.grad.numel(), on));
    } else {
      loops::apply(rule, t, p.grad.numel());
    }
  }
  if (gpu && stream == nullptr) return device::synchronize(on);
  return Status::ok();
}

}  // namespace

Result<double> grad_norm(const std::vector<Parameter>& params, double norm_type, Stream* stream) {
  KILN_RETURN_IF_ERROR(check_parameters(params));
  if (!(norm_type > 0))
    return invalid_argument("gradient norm type ", norm_type, " must be > 0 (2 for L2, inf for the largest magnitude)");
  const bool inf = std::isinf(norm_type);
  double total = 0;
  if (on_device(params)) {
    const device::Launch on = device::launch_on(params[0].value.device(), stream);
    std::vector<device::Span> xs;
    int64_t blocks = 0;
    for (const Parameter& p : params) {
      if (!p.grad.defined()) continue;
      xs.emplace_back(p.grad.data<float>(), p.grad.numel());
      blocks += device::reduction_blocks(p.grad.numel());
    }
    KILN_ASSIGN_OR_RETURN(Tensor scratch, device_scratch(params[0].value.device(), blocks + 1));
    auto* partials = static_cast<double*>(scratch.raw());
    const device::Reduction kind = inf                ? device::Reduction::kMaxAbs
                                   : norm_type == 2.0 ? device::Reduction::kSumSquares
                                                      : device::Reduction::kSumPow;
    KILN_RETURN_IF_ERROR(device::reduce(xs, kind, norm_type, partials, partials + blocks, on));
    // Waits for the stream, so the scratch may go back to the cache afterwards.
    KILN_RETURN_IF_ERROR(device::copy_and_wait(&total, partials + blocks, sizeof(double), on));
  } else {
    for (const Parameter& p : params) {
      if (!p.grad.defined()) continue;
      const float* g = p.grad.data<float>();
      const int64_t n = p.grad.numel();
      if (inf) {
        double m = loops::max_abs(g, n);
        total = std::isnan(m) ? m : std::max(total, m);
        if (std::isnan(total)) break;
      } else if (norm_type == 2) {
        total += loops::sum_squares(g, n);
      } else {
        total += sum_abs_pow(g, n, norm_type);
      }
    }
  }
  if (inf) return total;
  return norm_type == 2 ? std::sqrt(total) : std::pow(total, 1.0 / norm_type);
}

Result<double> clip_grad_norm(std::vector<Parameter>& params, double max_norm, double norm_type, Stream* stream) {
  if (!(max_norm > 0)) return invalid_argument("clip_grad_norm: the largest norm (", max_norm, ") must be > 0");
  KILN_ASSIGN_OR_RETURN(double total, grad_norm(params, norm_type, stream));
  if (!std::isfinite(total))
    return invalid_argument("the gradients' norm is ", total,
                            ": training diverged (lower the learning rate) or, with mixed precision, the loss scale "
                            "overflowed and this step should have been skipped");
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1) return total;
  KILN_RETURN_IF_ERROR(for_each_grad(params, stream, rules::ScaleGrad{static_cast<float>(coef)}));
  return total;
}

Status clip_grad_value(std::vector<Parameter>& params, double clip_value, Stream* stream) {
  if (!(clip_value > 0)) return invalid_argument("clip_grad_value: the bound (", clip_value, ") must be > 0");
  KILN_RETURN_IF_ERROR(check_parameters(params));
  const auto hi = static_cast<float>(clip_value);
  return for_each_grad(params, stream, rules::ClampGrad{-hi, hi});
}

Result<bool> unscale_grads(std::vector<Parameter>& params, double grad_scale, Stream* stream) {
  if (!(grad_scale > 0) || !std::isfinite(grad_scale))
    return invalid_argument("unscale_grads: grad_scale ", grad_scale,
                            " must be finite and > 0 (the factor the loss, and so the grads, were multiplied by)");
  KILN_RETURN_IF_ERROR(check_parameters(params));
  const rules::UnscaleGrad rule{static_cast<float>(1.0 / grad_scale)};
  if (!on_device(params)) {
    bool found = false;
    for (Parameter& p : params) {
      if (!p.grad.defined()) continue;
      float* g = p.grad.data<float>();
      const int64_t n = p.grad.numel();
      std::vector<char> bad(static_cast<size_t>(loops::chunk_count(n)), 0);
      loops::for_chunks(n, [&](int64_t b, int64_t e) {
        int any = 0;
#pragma omp simd reduction(| : any)
        for (int64_t i = b; i < e; ++i) any |= static_cast<int>(rule(g, i));
        bad[static_cast<size_t>(b / loops::kChunk)] = static_cast<char>(any != 0);
      });
      for (char c : bad) found = found || c != 0;
    }
    return found;
  }
  const device::Launch on = device::launch_on(params[0].value.device(), stream);
  KILN_ASSIGN_OR_RETURN(Tensor scratch, device_scratch(params[0].value.device(), 1));
  auto* flag = static_cast<int*>(scratch.raw());
  KILN_RETURN_IF_ERROR(device::fill_int(flag, 0, on));
  for (Parameter& p : params) {
    if (!p.grad.defined()) continue;
    KILN_RETURN_IF_ERROR(device::unscale(p.grad.data<float>(), p.grad.numel(), rule.inv_scale, flag, on));
  }
  int found = 0;
  KILN_RETURN_IF_ERROR(device::copy_and_wait(&found, flag, sizeof(int), on));
  return found != 0;
}

Result<GradAccumulator> GradAccumulator::create(const std::vector<Parameter>& params, int micro_batches, Mode mode) {
  if (micro_batches < 1)
    return invalid_argument("gradient accumulation over ", micro_batches, " micro-batches: the count must be >= 1");
  KILN_RETURN_IF_ERROR(check_parameters(params));
  GradAccumulator acc;
  acc.micro_batches_ = micro_batches;
  acc.mode_ = mode;
  if (!params.empty()) acc.device_ = params[0].value.device();
  for (const Parameter& p : params) {
    Tensor total;
    if (acc.device_.is_cuda()) {
      // Its contents do not matter until the first add() (touched == false): nothing to fill.
      KILN_ASSIGN_OR_RETURN(total, Tensor::empty(DataType::kFloat32, p.value.dims(),
                                                 cuda::device_allocator(acc.device_.index), "gradient accumulation"));
    } else {
      KILN_ASSIGN_OR_RETURN(total, Tensor::zeros(DataType::kFloat32, p.value.dims()));
    }
    acc.entries_.push_back({p.name, std::move(total), false});
  }
  return acc;
}

Status GradAccumulator::match(const std::vector<Parameter>& params) const {
  KILN_RETURN_IF_ERROR(check_parameters(params));
  if (params.size() != entries_.size())
    return invalid_argument("gradient accumulation was set up for ", entries_.size(), " parameters but got ",
                            params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name != entries_[i].name)
      return invalid_argument("gradient accumulation expected parameter '", entries_[i].name, "' at position ", i,
                              " but got '", params[i].name, "'");
    if (params[i].value.dims() != entries_[i].total.dims())
      return invalid_argument("parameter '", params[i].name, "' has dims ", params[i].value.dims().to_string(),
                              " but gradient accumulation was set up for ", entries_[i].total.dims().to_string());
    if (params[i].value.device() != device_)
      return invalid_argument("parameter '", params[i].name, "' is on ", params[i].value.device().to_string(),
                              " but gradient accumulation was set up for ", device_.to_string());
  }
  if (device_.is_cuda() && stream_ != nullptr && stream_->device() != device_)
    return invalid_argument("gradient accumulation's stream is on ", stream_->device().to_string(),
                            " but the parameters are on ", device_.to_string());
  return Status::ok();
}

Status GradAccumulator::finish_default_stream() const {
  if (!device_.is_cuda() || stream_ != nullptr) return Status::ok();
  return device::synchronize(device::launch_on(device_, nullptr));
}

Status GradAccumulator::add(const std::vector<Parameter>& params) {
  KILN_RETURN_IF_ERROR(match(params));
  if (count_ == 0)
    for (Entry& entry : entries_) entry.touched = false;
  const device::Launch on = device::launch_on(device_, stream_);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad.defined()) continue;
    Entry& entry = entries_[i];
    const rules::AccumulateGrad rule{!entry.touched};
    const rules::Tensors t{nullptr, params[i].grad.data<float>(), entry.total.data<float>()};
    if (device_.is_cuda()) {
      KILN_RETURN_IF_ERROR(device::apply(rule, t, entry.total.numel(), on));
    } else {
      loops::apply(rule, t, entry.total.numel());
    }
    entry.touched = true;
  }
  ++count_;
  return finish_default_stream();
}

Status GradAccumulator::finish(std::vector<Parameter>& params) {
  KILN_RETURN_IF_ERROR(match(params));
  if (count_ == 0) return invalid_argument("gradient accumulation: finish() before any add()");
  const device::Launch on = device::launch_on(device_, stream_);
  for (size_t i = 0; i < params.size(); ++i) {
    Entry& entry = entries_[i];
    if (!entry.touched) continue;
    if (!params[i].grad.defined())
      return invalid_argument("parameter '", params[i].name,
                              "' has accumulated gradients but no grad tensor to write them to; bind one");
    const rules::FinishGrad rule{mode_ == Mode::kMean, static_cast<float>(count_)};
    const rules::Tensors t{params[i].grad.data<float>(), entry.total.data<float>()};
    if (device_.is_cuda()) {
      KILN_RETURN_IF_ERROR(device::apply(rule, t, entry.total.numel(), on));
    } else {
      loops::apply(rule, t, entry.total.numel());
    }
  }
  for (Entry& entry : entries_) entry.touched = false;
  count_ = 0;
  return finish_default_stream();
}

Result<std::map<std::string, Tensor>> GradAccumulator::export_state() const {
  std::map<std::string, Tensor> out;
  KILN_ASSIGN_OR_RETURN(Tensor count, Tensor::empty(DataType::kInt64, Dims{}));
  *count.data<int64_t>() = count_;
  out["grad_accum.count"] = std::move(count);
  const device::Launch on = device::launch_on(device_, stream_);
  for (const Entry& entry : entries_) {
    // An untouched total holds stale numbers: export zeros, which import reads back as untouched.
    KILN_ASSIGN_OR_RETURN(Tensor copy, Tensor::zeros(DataType::kFloat32, entry.total.dims()));
    if (entry.touched) {
      if (device_.is_cuda()) {
        KILN_RETURN_IF_ERROR(device::copy_and_wait(copy.raw(), entry.total.raw(), entry.total.nbytes(), on));
      } else {
        std::memcpy(copy.raw(), entry.total.raw(), entry.total.nbytes());
      }
    }
    out[entry.name + ".grad_accum"] = std::move(copy);
    KILN_ASSIGN_OR_RETURN(Tensor touched, Tensor::empty(DataType::kBool, Dims{}));
    *touched.data<bool>() = entry.touched;
    out[entry.name + ".grad_accum_touched"] = std::move(touched);
  }
  return out;
}
Status GradAccumulator::import_state(const std::map<std::string, Tensor>& state) {
  auto find = [&](const std::string& key, DataType dtype, const Dims& dims) -> Result<const Tensor*> {
    auto it = state.find(key);
    if (it == state.end()) return invalid_argument("gradient accumulation state has no '", key, "'");
    const Tensor& t = it->second;
    if (t.dtype() != dtype || t.dims() != dims || !t.device().is_cpu() || !t.is_contiguous())
      return invalid_argument("gradient accumulation state '", key, "' is ", t.describe(), "; expected ",
                              dtype_name(dtype), dims.to_string(), " on the host");
    return &t;
  };
  KILN_ASSIGN_OR_RETURN(const Tensor* count, find("grad_accum.count", DataType::kInt64, Dims{}));
  const int64_t c = *count->data<int64_t>();
  if (c < 0 || c > micro_batches_)
    return invalid_argument("gradient accumulation state has count ", c, " outside [0, ", micro_batches_, "]");
  std::vector<const Tensor*> totals, touched;
  for (const Entry& entry : entries_) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, find(entry.name + ".grad_accum", DataType::kFloat32, entry.total.dims()));
    KILN_ASSIGN_OR_RETURN(const Tensor* u, find(entry.name + ".grad_accum_touched", DataType::kBool, Dims{}));
    totals.push_back(t);
    touched.push_back(u);
  }
  const device::Launch on = device::launch_on(device_, stream_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (device_.is_cuda()) {
      KILN_RETURN_IF_ERROR(device::copy_and_wait(entries_[i].total.raw(), totals[i]->raw(), totals[i]->nbytes(), on));
    } else {
      std::memcpy(entries_[i].total.raw(), totals[i]->raw(), totals[i]->nbytes());
    }
    entries_[i].touched = *touched[i]->data<bool>();
  }
  count_ = static_cast<int>(c);
  return Status::ok();
}

}  // namespace kiln::train
